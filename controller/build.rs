//! The migrations are embedded at compile time (`db::MIGRATIONS`); a new or changed one must
//! rebuild the crate, which cargo cannot tell from the Rust sources alone.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
