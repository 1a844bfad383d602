//! Schema helpers for the published document.

use schemars::JsonSchema;
use schemars::r#gen::SchemaGenerator;
use schemars::schema::Schema;
use std::marker::PhantomData;

/// The schema of an `Option<T>` field that is always present, with `null`
/// for `None`: `#[schemars(with = "crate::schema::Nullable<T>")]` on a
/// field of type `Option<T>` makes the property required and nullable
/// (schemars' own `#[schemars(required)]` would drop the `null`). Only the
/// schema changes; serde still writes `null` for `None`, so such fields
/// must not use `skip_serializing_if`.
pub struct Nullable<T>(PhantomData<T>);

impl<T: JsonSchema> JsonSchema for Nullable<T> {
    fn is_referenceable() -> bool {
        false
    }

    fn schema_name() -> String {
        <Option<T>>::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Option<T>>::json_schema(generator)
    }
}
