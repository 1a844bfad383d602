//! How command results are printed.

use crate::generated_cli::CliConfig;
use workspace_client::{Error, ResponseValue};

/// Marks an error that was already printed.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error already reported")
    }
}

impl std::error::Error for Reported {}

/// Prints an API or transport error to stderr.
pub fn report_error<T: serde::Serialize + std::fmt::Debug>(error: &Error<T>) {
    match error {
        Error::ErrorResponse(response) => {
            let status = response.status();
            let body = serde_json::to_value(response.as_ref()).unwrap_or_default();
            let code = body
                .get("error_code")
                .and_then(|v| v.as_str())
                .unwrap_or("error");
            let message = body.get("message").and_then(|v| v.as_str()).unwrap_or("");
            eprintln!("error: {} {code}: {message}", status.as_u16());
        }
        Error::CommunicationError(e) => eprintln!("error: cannot reach the server: {e}"),
        other => eprintln!("error: {other}"),
    }
}

/// JSON on stdout.
pub struct JsonOutput;

impl CliConfig for JsonOutput {
    fn success_item<T>(&self, value: &ResponseValue<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        let text = serde_json::to_string_pretty(value.as_ref()).unwrap_or_default();
        println!("{text}");
    }

    fn success_no_item(&self, _value: &ResponseValue<()>) {}

    fn error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        report_error(value);
    }

    fn list_start<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        print!("[");
    }

    fn list_item<T>(&self, value: &T)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        print!("{}", serde_json::to_string(value).unwrap_or_default());
    }

    fn list_end_success<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        println!("]");
    }

    fn list_end_error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        println!("]");
        report_error(value);
    }
}
