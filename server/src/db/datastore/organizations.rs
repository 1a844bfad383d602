//! Organizations.

use super::Datastore;
use crate::authz::{OrgAccess, SYSTEM_ROLES};
use crate::error::Error;
use uuid::Uuid;

/// Turns a name into a URL slug: lowercase ASCII letters and digits joined
/// by single hyphens, at most 48 characters, never empty.
pub fn slugify(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= 48 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        "org".to_string()
    } else {
        slug
    }
}

impl Datastore {
    /// The caller's active membership in `org_id` with its role and
    /// permission names, or `None` when there is none.
    pub async fn org_access(
        &self,
        user_id: Uuid,
        org_id: Uuid,
    ) -> Result<Option<OrgAccess>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT r.id, r.name, r.hierarchy_level, \
                        coalesce(array_agg(p.name) FILTER (WHERE p.name IS NOT NULL), '{}') \
                 FROM memberships m \
                 JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
                 LEFT JOIN role_permissions rp ON rp.role_id = r.id \
                 LEFT JOIN permissions p ON p.id = rp.permission_id \
                 WHERE m.user_id = $1 AND m.organization_id = $2 AND m.status = 'active' \
                 GROUP BY r.id",
                &[&user_id, &org_id],
            )
            .await?;
        Ok(row.map(|r| OrgAccess {
            org_id,
            user_id,
            role_id: r.get(0),
            role_name: r.get(1),
            level: r.get(2),
            permissions: r.get(3),
        }))
    }
}

/// Inserts an organization with a unique slug (derived from `slug_base`,
/// with a random suffix on collision), its four system roles with their
/// permissions, and `owner_id`'s active owner membership. Runs inside the
/// caller's transaction. Returns the organization id and the owner role id.
pub(crate) async fn insert_with_system_roles(
    tx: &deadpool_postgres::Transaction<'_>,
    name: &str,
    slug_base: &str,
    owner_id: Uuid,
    is_personal: bool,
) -> Result<(Uuid, Uuid), Error> {
    let org_id = Uuid::new_v4();
    let base = slugify(slug_base);
    let mut slug = base.clone();
    for attempt in 0.. {
        let inserted = tx
            .execute(
                "INSERT INTO organizations (id, name, slug, is_personal, created_by) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (slug) DO NOTHING",
                &[&org_id, &name, &slug, &is_personal, &owner_id],
            )
            .await?;
        if inserted == 1 {
            break;
        }
        if attempt >= 20 {
            return Err(Error::internal("could not find a free organization slug"));
        }
        let suffix = Uuid::new_v4().simple().to_string();
        slug = format!("{base}-{}", &suffix[..6]);
    }

    let mut owner_role = None;
    for role in SYSTEM_ROLES {
        let role_id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO roles (id, organization_id, name, description, hierarchy_level, is_system_role) \
             VALUES ($1, $2, $3, $4, $5, true)",
            &[&role_id, &org_id, &role.name, &role.description, &role.level],
        )
        .await?;
        let names: Vec<&str> = role.permissions.to_vec();
        tx.execute(
            "INSERT INTO role_permissions (role_id, permission_id) \
             SELECT $1, id FROM permissions WHERE name = ANY($2)",
            &[&role_id, &names],
        )
        .await?;
        if role.name == "owner" {
            owner_role = Some(role_id);
        }
    }
    let owner_role = owner_role.ok_or_else(|| Error::internal("no owner system role"))?;
    tx.execute(
        "INSERT INTO memberships (user_id, organization_id, role_id, status) \
         VALUES ($1, $2, $3, 'active')",
        &[&owner_id, &org_id, &owner_role],
    )
    .await?;
    Ok((org_id, owner_role))
}

#[cfg(test)]
mod tests {
    use super::slugify;

    #[test]
    fn slugs() {
        assert_eq!(slugify("Ada Lovelace's Org"), "ada-lovelace-s-org");
        assert_eq!(slugify("  --Hello__World--  "), "hello-world");
        assert_eq!(slugify("日本"), "org");
        assert_eq!(slugify(""), "org");
        assert!(slugify(&"x".repeat(100)).len() <= 48);
    }
}
