//! Prints the `/Schemas`, `/ResourceTypes` and `/ServiceProviderConfig`
//! documents as one JSON object (for checking them with scim2-models).

fn main() {
    let base = "https://scim.test/scim/v2";
    let out = serde_json::json!({
        "schemas": workspace_scim::schema::schemas(base),
        "resourceTypes": workspace_scim::schema::resource_types(base),
        "serviceProviderConfig": workspace_scim::schema::service_provider_config(base, 100),
    });
    println!("{out:#}");
}
