fn main() {
    // refinery's embed_migrations! does not notice new files by itself.
    println!("cargo:rerun-if-changed=../migrations");
}
