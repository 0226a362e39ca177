//! Issue 45: `cohort course data push|list|rm|quota` against a real controller. A directory is
//! streamed as a tar and stored under the hash the CLI computed; a link leading outside it, a
//! name with `/` and a push past the quota are each an `Error:` line, and nothing is kept.

use crate::cli_support;

#[test]
fn course_data_push_list_rm_and_bad_input() {
    let controller = cli_support::Controller::start();
    let cli = cli_support::Cli::admin_of(&controller);
    let tarball = cli_support::base_image_tarball();
    let tarball = tarball.to_str().unwrap();
    cli.ok(&["-q", "image", "import", tarball, "--alias", "cohort/base"]);
    cli.ok(&[
        "course",
        "create",
        "cd101",
        "--title",
        "Data",
        "--image",
        "cohort/base",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(corpus.join("sub")).unwrap();
    std::fs::write(corpus.join("hello.txt"), "hello\n").unwrap();
    std::os::unix::fs::symlink("../hello.txt", corpus.join("sub/up")).unwrap();
    let pushed = cli.ok(&["course", "data", "push", "cd101", corpus.to_str().unwrap()]);
    assert!(
        pushed.starts_with("Dataset corpus pushed to cd101"),
        "{pushed}"
    );
    let listed = cli.ok(&["course", "data", "list", "cd101"]);
    assert!(
        listed.lines().any(|l| l.starts_with("corpus\t")),
        "{listed}"
    );

    let stored = |_: &cli_support::Cli| -> usize {
        std::fs::read_dir(controller.state.path().join("data"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(stored(&cli), 1);

    // A link out of the directory: refused before anything is sent.
    let escape = dir.path().join("escape");
    std::fs::create_dir_all(&escape).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", escape.join("shadow")).unwrap();
    cli.fails(
        &["course", "data", "push", "cd101", escape.to_str().unwrap()],
        "leads outside",
    );
    let path = corpus.to_str().unwrap();
    cli.fails(
        &["course", "data", "push", "cd101", path, "--name", "a/b"],
        "field: name",
    );
    // Past the quota.
    cli.ok(&["course", "data", "quota", "cd101", "1"]);
    let big = dir.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    std::fs::write(big.join("blob"), vec![1u8; 3 << 20]).unwrap();
    cli.fails(
        &["course", "data", "push", "cd101", big.to_str().unwrap()],
        "field: quota",
    );
    assert_eq!(stored(&cli), 1, "a refused push left a file");

    cli.ok(&["course", "data", "rm", "cd101", "corpus"]);
    let listed = cli.ok(&["course", "data", "list", "cd101"]);
    assert!(!listed.contains("corpus\t"), "{listed}");
    assert_eq!(stored(&cli), 0, "the removed version's tarball is gone");
}
