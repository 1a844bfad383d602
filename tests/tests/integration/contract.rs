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
/// declares its error statuses (`workspace_api::error_statuses`: at least
/// 500, 401 unless public, `Retry-After` on 429) with the error schema;
/// every non-public one requires the bearer scheme.
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
            let has_input = !op.parameters.is_empty() || op.request_body.is_some();
            let expected = workspace_api::error_statuses(&id, has_input, op.request_body.is_some())
                .unwrap_or_else(|| panic!("{id}: not in OPERATION_ERRORS"));
            let declared: Vec<u16> = op
                .responses
                .responses
                .keys()
                .filter_map(|status| match status {
                    openapiv3::StatusCode::Code(code) if *code >= 400 => Some(*code),
                    openapiv3::StatusCode::Code(_) => None,
                    openapiv3::StatusCode::Range(range) => {
                        panic!("{id}: a {range}XX range instead of exact statuses")
                    }
                })
                .collect();
            let expected_statuses: Vec<u16> = expected.iter().map(|(s, _)| *s).collect();
            assert_eq!(declared, expected_statuses, "{id}: error statuses");
            assert!(declared.contains(&500), "{id}: 500");
            if !public.contains(&id.as_str()) {
                assert!(declared.contains(&401), "{id}: 401");
            }
            for (status, response) in &op.responses.responses {
                let openapiv3::StatusCode::Code(code @ 400..) = status else {
                    continue;
                };
                let text = serde_json::to_string(response).unwrap();
                let schema = if workspace_api::DEPLOYMENT_KEY_OPERATIONS.contains(&id.as_str()) {
                    "#/components/schemas/OpenAiError\""
                } else if workspace_api::SCIM_OPERATIONS.contains(&id.as_str()) && *code != 408 {
                    // SCIM's own error shape, as `application/scim+json`.
                    assert!(
                        text.contains("application/scim+json"),
                        "{id}: {code}: {text}"
                    );
                    "#/components/schemas/ScimError\""
                } else {
                    "#/components/schemas/Error\""
                };
                assert!(text.contains(schema), "{id}: {code} schema: {text}");
                if *code == 429 {
                    assert!(
                        text.contains("Retry-After"),
                        "{id}: 429 without Retry-After"
                    );
                }
            }
            match &op.security {
                Some(s) if s.is_empty() => assert!(public.contains(&id.as_str()), "{id} is public"),
                None => assert!(!public.contains(&id.as_str()), "{id} should be public"),
                Some(s) if workspace_api::DEPLOYMENT_KEY_OPERATIONS.contains(&id.as_str()) => {
                    assert_eq!(s.len(), 1, "{id}");
                    assert!(s[0].contains_key("deploymentKey"), "{id}: {s:?}");
                }
                Some(s) if workspace_api::SCIM_OPERATIONS.contains(&id.as_str()) => {
                    assert_eq!(s.len(), 1, "{id}");
                    assert!(s[0].contains_key("scimToken"), "{id}: {s:?}");
                }
                Some(other) => panic!("{id}: unexpected security {other:?}"),
            }
        }
    }
    assert!(seen >= 5);
    assert!(doc.security.as_ref().is_some_and(|s| s.len() == 1));
}
