//! Issue 48, the PyTorch image (`images/pytorch`): a student of a course on it trains a tiny
//! model for one step on the CPU, over SSH (a login shell finds the image's Python with torch)
//! and in a notebook opened from the portal's JupyterLab. The image is built once per machine by
//! `images/build pytorch` (cached by its recipe's hash, as `scripts/setup --image pytorch` does;
//! a fresh machine downloads about 2.5 GB of wheels once, see images/README.md), imported
//! through the controller with the marks its metadata carries.

use crate::cli_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::OneNode;
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestNetwork};

/// The PyTorch image's tarball: `images/build pytorch` (nothing to do when the cache holds the
/// one its recipe makes).
fn pytorch_tarball() -> PathBuf {
    let cache = std::env::var("COHORT_CACHE_DIR").unwrap_or_else(|_| "/var/cache/cohort".into());
    let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../images/build");
    let out = Command::new(build)
        .args(["pytorch", "--cache", &cache])
        .output()
        .expect("run images/build pytorch");
    assert!(
        out.status.success(),
        "images/build pytorch: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    cohort_e2e::images::tarball("pytorch").expect("the pytorch tarball images/build made")
}

/// One SGD step on a linear model; prints whether the loss went down and whether CUDA is there.
const ONE_STEP: &str = "import torch; torch.manual_seed(0); m = torch.nn.Linear(4, 1); \
o = torch.optim.SGD(m.parameters(), lr=0.1); x = torch.randn(16, 4); y = x.sum(1, keepdim=True); \
l0 = torch.nn.functional.mse_loss(m(x), y); o.zero_grad(); l0.backward(); o.step(); \
l1 = torch.nn.functional.mse_loss(m(x), y); print('trained', l1.item() < l0.item(), torch.cuda.is_available())";

// The deployment's helpers block on a runtime of their own: they run before the browser's.
#[test]
fn a_student_trains_a_model_on_the_pytorch_image_over_ssh_and_in_jupyterlab() {
    let started = Instant::now();
    let tarball = pytorch_tarball();
    eprintln!("images/build pytorch: {:?}", started.elapsed());
    let mut net = TestNetwork::claim();
    let lab = net.netns();
    let node = OneNode::start_on(Some(&net));
    let cli = &node.cli;
    let imported = Instant::now();
    cli.ok(&[
        "-q",
        "image",
        "import",
        tarball.to_str().expect("path"),
        "--alias",
        "cohort/pytorch",
        "--jupyter",
    ]);
    eprintln!("import through the controller: {:?}", imported.elapsed());
    // The metadata's mark is read at import: the image is GPU-ready without --gpu-ready.
    let list = cli.ok(&["image", "list", "-f", "csv"]);
    let row = list
        .lines()
        .find(|l| l.contains("cohort/pytorch"))
        .unwrap_or_else(|| panic!("cohort/pytorch in {list}"));
    let cols: Vec<&str> = row.split(',').collect();
    assert_eq!(
        cols.get(2..4),
        Some(&["yes", "yes"][..]),
        "GPU ready, JupyterLab: {row}"
    );
    cli.ok(&[
        "course",
        "create",
        "pt1",
        "--title",
        "Deep learning",
        "--image",
        "cohort/pytorch",
        "--memory",
        "3GiB",
        "--disk",
        "12GiB",
    ]);
    let key = SshKey::generate();
    let dir = tempfile::tempdir().expect("dir");
    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        format!(
            "username,name,email,ssh_key\nann,Ann,,{}\n",
            key.public_key()
        ),
    )
    .expect("roster");
    cli.ok(&["course", "roster", "pt1", roster.to_str().expect("path")]);
    let provisioned = Instant::now();
    cli.ok(&["course", "provision", "pt1", "--wait", "--quiet"]);
    eprintln!("provision: {:?}", provisioned.elapsed());
    let endpoints = cli.ok(&["course", "endpoints", "pt1"]);
    let row = endpoints
        .lines()
        .find(|l| l.starts_with("ann,"))
        .unwrap_or_else(|| panic!("ann's row in {endpoints}"));
    let f: Vec<&str> = row.split(',').collect();
    let (host, port) = (f[3].to_string(), f[4].parse::<u16>().expect("port"));

    // Over SSH, as a student logs in: the login shell's python3 is the image's, with torch.
    let script = format!(
        "cat >step.py <<'EOF'\n{ONE_STEP}\nEOF\nbash -lc 'command -v python3; python3 step.py'; \
         cat /opt/jupyter/etc/jupyter/jupyter_server_config.json"
    );
    let mut out = String::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !out.contains("trained") {
        assert!(
            Instant::now() < deadline,
            "no training step over SSH in 90 s: {out}"
        );
        let run = key.run_in(&lab.name, &host, port, "ann", &script);
        out = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        if !out.contains("trained") {
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    assert!(out.contains("/opt/jupyter/bin/python3\n"), "{out}");
    assert!(out.contains("trained True False\n"), "{out}");
    assert!(out.contains("\"cull_idle_timeout\": 3600"), "{out}");

    set_portal_password(
        node.controller.db_url(),
        node.controller.state.path(),
        "ann",
        "ann's long password",
    );
    let base = node.controller.url.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(in_a_notebook(&node, &base));
    eprintln!("pytorch image test: {:?}", started.elapsed());
}

/// Ann opens JupyterLab from her container's page and runs the step in a new notebook.
async fn in_a_notebook(node: &OneNode, base: &str) {
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;
    browser.sign_in(base, "ann", "ann's long password").await;
    browser.goto(&format!("{base}/containers/pt1-ann")).await;
    assert_eq!(browser.text("#open-jupyter").await, "Open JupyterLab");
    browser.follow("#open-jupyter").await;
    browser
        .click_when_ready(
            ".jp-LauncherCard[data-category='Notebook']",
            Duration::from_secs(120),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while browser
        .run("return document.body.innerText.includes('| Idle');")
        .await
        != true
    {
        assert!(Instant::now() < deadline, "the kernel never became ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    browser
        .click_when_ready(".jp-Cell .cm-content", Duration::from_secs(30))
        .await;
    browser.keys(".jp-Cell .cm-content", ONE_STEP).await;
    browser
        .click_when_ready(
            "[data-command='notebook:run-cell-and-select-next']",
            Duration::from_secs(30),
        )
        .await;
    // Importing torch in a fresh kernel takes a while on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(180);
    while browser.count(".jp-OutputArea-output").await == 0 {
        if Instant::now() > deadline {
            let shot = browser.screenshot("pytorch-no-output").await;
            let log = std::fs::read_to_string(node.controller.state.path().join("serve.log"))
                .unwrap_or_default();
            panic!("no output from the cell in 180 s (see {shot:?}); controller log:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        browser.text(".jp-OutputArea-output").await,
        "trained True False"
    );
}
