//! Prints SQL statements checking that `filter::to_jsonpath` agrees with
//! `filter::matches` on sample documents; pipe into `psql` and look for
//! rows where the two columns differ.

use serde_json::json;
use workspace_scim::{Kind, filter};

fn main() {
    let docs = [
        json!({
            "schemas": [workspace_scim::USER_URN],
            "id": "2819c223", "externalId": "Ext-1", "userName": "Bjensen@Example.com",
            "name": {"familyName": "O'Hara \"Q\" \\ $ @)", "givenName": "Barbara"},
            "title": "", "active": true,
            "emails": [{"value": "bjensen@example.com", "type": "work", "primary": true}, {"value": "babs@jensen.org", "type": "home"}],
            "meta": {"created": "2026-11-29T01:02:03.123456Z", "lastModified": "2026-11-30T00:00:00.000000Z"},
            workspace_scim::ENTERPRISE_USER_URN: {"department": "R&D.*", "manager": {"value": "m1"}},
        }),
        json!({"schemas": [workspace_scim::USER_URN], "id": "x", "userName": "other\nline", "active": false}),
    ];
    let filters = [
        r#"userName eq "bjensen@example.com""#,
        r#"userName eq "BJENSEN@EXAMPLE.COM""#,
        r#"userName sw "bJ""#,
        r#"userName ew ".COM""#,
        r#"userName co "n@e""#,
        r#"userName co ".""#,
        r#"userName eq "other\nline""#,
        r#"externalId eq "Ext-1""#,
        r#"externalId eq "ext-1""#,
        r#"externalId ne "ext-1""#,
        r#"nickName ne "x""#,
        r#"title pr"#,
        r#"title eq null"#,
        r#"name pr"#,
        r#"emails pr"#,
        r#"active eq true"#,
        r#"active ne true"#,
        r#"emails eq "babs@jensen.org""#,
        r#"emails[type eq "work" and value co "@example.com"]"#,
        r#"emails[type eq "work" and value co "jensen.org"]"#,
        r#"emails[not (type eq "work")]"#,
        r#"meta.created gt "2026-11-29T01:02:03Z""#,
        r#"meta.created lt "2026-11-29T02:02:03+01:00""#,
        r#"meta.created le "2026-11-29T01:02:03.123456Z""#,
        r#"name.familyName eq "o'hara \"q\" \\ $ @)""#,
        r#"name.familyName co "\"q\" \\ $""#,
        r#"name.familyName sw "O'H""#,
        r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "r&d.*""#,
        r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "r&dx*""#,
        r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value eq "m1""#,
        r#"id sw "2819" and not (userName pr)"#,
        r#"id sw "2819" or userName sw "oth""#,
        r#"id co "é漢""#,
    ];
    println!("CREATE TEMP TABLE d(i int, doc jsonb);");
    for (i, d) in docs.iter().enumerate() {
        println!(
            "INSERT INTO d VALUES ({i}, '{}');",
            d.to_string().replace('\'', "''")
        );
    }
    for f in filters {
        let parsed = filter::parse(Kind::User, f).expect("test filter");
        let jp = filter::to_jsonpath(&parsed).replace('\'', "''");
        let expected: Vec<String> = docs
            .iter()
            .map(|d| filter::matches(&parsed, d).to_string())
            .collect();
        println!(
            "SELECT '{}' AS f, string_agg((doc @@ '{jp}'::jsonpath)::text, ',' ORDER BY i) AS pg, '{}' AS rust FROM d;",
            f.replace('\'', "''"),
            expected.join(",")
        );
    }
}
