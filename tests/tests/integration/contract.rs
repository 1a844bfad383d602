//! The published contract must match the code.

/// Fails with a diff when the API trait changed without regenerating
/// `openapi/workspace.json` (`EXPECTORATE=overwrite` or
/// `cargo xtask openapi generate` to update).
#[test]
fn openapi_document_is_up_to_date() {
    let doc = workspace_api::openapi_document();
    let mut text = serde_json::to_string_pretty(&doc).unwrap();
    text.push('\n');
    expectorate::assert_contents("../openapi/workspace.json", &text);
}

/// Every operation has exactly one tag, a summary and a description, and
/// declares 4XX/5XX responses with the error schema; every non-public one
/// requires the bearer scheme.
#[test]
fn every_operation_is_documented_and_secured() {
    let doc = workspace_api::openapi_document();
    let public = workspace_api::PUBLIC_OPERATIONS;
    let mut seen = 0;
    for (path, item) in &doc.paths.paths {
        let item = item.as_item().unwrap();
        for (method, op) in item.iter() {
            seen += 1;
            let id = op.operation_id.clone().unwrap();
            assert_eq!(op.tags.len(), 1, "{method} {path}: one tag");
            assert!(
                op.summary.as_deref().is_some_and(|s| !s.is_empty()),
                "{id}: summary"
            );
            assert!(
                op.description.as_deref().is_some_and(|s| !s.is_empty()),
                "{id}: description"
            );
            for range in [4, 5] {
                let response = op
                    .responses
                    .responses
                    .get(&openapiv3::StatusCode::Range(range))
                    .unwrap_or_else(|| panic!("{id}: no {range}XX response"));
                let text = serde_json::to_string(response).unwrap();
                assert!(
                    text.contains("#/components/schemas/Error")
                        || text.contains("#/components/responses/Error"),
                    "{id}: {range}XX schema: {text}"
                );
            }
            match &op.security {
                Some(s) if s.is_empty() => assert!(public.contains(&id.as_str()), "{id} is public"),
                None => assert!(!public.contains(&id.as_str()), "{id} should be public"),
                Some(other) => panic!("{id}: unexpected security {other:?}"),
            }
        }
    }
    assert!(seen >= 5);
    assert!(doc.security.as_ref().is_some_and(|s| s.len() == 1));
}
