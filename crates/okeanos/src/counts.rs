//! Structs of counters, each field declared once: [`counters!`] declares the struct and its
//! `since` (each field minus an earlier reading's), so a field added to a struct is counted in
//! its differences without a second list to keep in step.

/// Declares a struct whose fields are all `u64` counters, with
/// `pub fn since(&self, base: &Self) -> Self`: the counts accumulated since `base`, an earlier
/// reading of the same source (every field is monotonic, so no difference is negative).
macro_rules! counters {
    ($(#[$sm:meta])* pub struct $t:ident { $( $(#[$fm:meta])* pub $f:ident : u64 ),* $(,)? }) => {
        $(#[$sm])*
        pub struct $t {
            $( $(#[$fm])* pub $f: u64, )*
        }

        impl $t {
            /// The counts accumulated since `base`, an earlier reading of the same source.
            pub fn since(&self, base: &$t) -> $t {
                $t { $( $f: self.$f - base.$f, )* }
            }
        }
    };
}
