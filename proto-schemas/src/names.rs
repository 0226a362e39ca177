//! The wire names of Cohort's state and kind enums, and (feature `diesel`, the controller's)
//! how they are stored: a PostgreSQL `text` column holding the same name. Reading a value no
//! variant has is an error, never a default, so a state the code does not know cannot pass
//! for another.

/// A name no variant of `kind` has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    pub kind: &'static str,
    pub name: String,
}

impl std::fmt::Display for UnknownName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is not {}", self.name, self.kind)
    }
}

impl std::error::Error for UnknownName {}

/// Gives a unit enum its names: `as_str`, `FromStr` (an unknown name is an [`UnknownName`]),
/// `Display` and `ALL`; with the `diesel` feature, `ToSql`/`FromSql` for a `text` column too
/// (the enum derives `AsExpression` and `FromSqlRow` with `sql_type = Text`). The names must be
/// the enum's serde names; `names_are_serde_names` checks that for the wire's enums.
#[macro_export]
macro_rules! named_enum {
    ($ty:ident, $what:literal { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::names::UnknownName;

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                match name {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::names::UnknownName {
                        kind: $what,
                        name: name.to_string(),
                    }),
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        $crate::text_column!($ty);
    };
}

/// `ToSql`/`FromSql` for a `text` column (see [`named_enum!`]).
#[cfg(feature = "diesel")]
#[macro_export]
macro_rules! text_column {
    ($ty:ident) => {
        impl ::diesel::serialize::ToSql<::diesel::sql_types::Text, ::diesel::pg::Pg> for $ty {
            fn to_sql<'b>(
                &'b self,
                out: &mut ::diesel::serialize::Output<'b, '_, ::diesel::pg::Pg>,
            ) -> ::diesel::serialize::Result {
                <str as ::diesel::serialize::ToSql<::diesel::sql_types::Text, ::diesel::pg::Pg>>::to_sql(
                    self.as_str(),
                    out,
                )
            }
        }

        impl ::diesel::deserialize::FromSql<::diesel::sql_types::Text, ::diesel::pg::Pg> for $ty {
            fn from_sql(
                bytes: <::diesel::pg::Pg as ::diesel::backend::Backend>::RawValue<'_>,
            ) -> ::diesel::deserialize::Result<Self> {
                let name = <String as ::diesel::deserialize::FromSql<
                    ::diesel::sql_types::Text,
                    ::diesel::pg::Pg,
                >>::from_sql(bytes)?;
                Ok(name.parse::<$ty>()?)
            }
        }
    };
}

/// Without the `diesel` feature there is no column to map.
#[cfg(not(feature = "diesel"))]
#[macro_export]
macro_rules! text_column {
    ($ty:ident) => {};
}

#[cfg(test)]
mod tests {
    use crate::api::courses::CourseState;
    use crate::api::instances::{DesiredState, ObservedState};
    use crate::api::nodes::NodeState;
    use crate::api::operations::{OperationKind, OperationStatus};

    fn same<
        T: serde::Serialize + std::fmt::Display + std::str::FromStr + PartialEq + std::fmt::Debug,
    >(
        all: &[T],
    ) where
        T::Err: std::fmt::Debug,
    {
        for value in all {
            let serde = serde_json::to_value(value).unwrap();
            assert_eq!(serde.as_str(), Some(value.to_string().as_str()));
            assert_eq!(&value.to_string().parse::<T>().unwrap(), value);
        }
    }

    #[test]
    fn names_are_serde_names() {
        same(NodeState::ALL);
        same(DesiredState::ALL);
        same(ObservedState::ALL);
        same(OperationKind::ALL);
        same(OperationStatus::ALL);
        same(CourseState::ALL);
    }

    #[test]
    fn an_unknown_name_is_an_error() {
        let e = "runing".parse::<ObservedState>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"runing\" is not an observed instance state"
        );
    }
}
