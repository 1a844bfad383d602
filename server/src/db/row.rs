//! Rows read by column name.
//!
//! [`db_row!`] declares a row type once: each field with the SQL expression
//! it is selected as. From that one list come the struct, `COLUMNS` (the
//! select list, every expression `AS` its field's name) and `from_row`
//! (every field read by that name), so no index has to track a column list
//! written elsewhere, and a column added in the middle cannot shift the
//! others.

/// Declares a row type read by column name (see the module documentation):
///
/// ```ignore
/// db_row! {
///     /// An instance with its session's state.
///     pub struct InstanceRow {
///         pub id: Uuid = "i.id",
///         pub status: McpSessionStatus = "ss.status",
///     }
/// }
/// // InstanceRow::COLUMNS == "i.id AS id, ss.status AS status"
/// ```
macro_rules! db_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty = $sql:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $ty,)+
        }

        impl $name {
            /// The select list: each field's expression `AS` its name.
            #[allow(dead_code)]
            pub const COLUMNS: &'static str = {
                let all = concat!($($sql, " AS ", stringify!($field), ", "),+);
                all.split_at(all.len() - 2).0
            };

            /// Reads a row selected with [`Self::COLUMNS`] (or any select
            /// list naming the same columns), by column name.
            #[allow(dead_code)]
            pub fn from_row(row: &tokio_postgres::Row) -> Self {
                Self {
                    $($field: row.get(stringify!($field)),)+
                }
            }
        }
    };
}

pub(crate) use db_row;

#[cfg(test)]
mod tests {
    db_row! {
        #[allow(dead_code)]
        struct Probe {
            id: uuid::Uuid = "p.id",
            label: String = "coalesce(p.label, '')",
        }
    }

    #[test]
    fn columns_name_every_expression() {
        assert_eq!(Probe::COLUMNS, "p.id AS id, coalesce(p.label, '') AS label");
    }
}
