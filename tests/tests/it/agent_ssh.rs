//! A student's way in, made by the agent on the real LXD: the user with their key, sudo and a
//! home volume, sshd reached through the proxy port with the real `ssh` client; a key never
//! given is refused; the home volume outlives the instance, and takes the size of the next
//! create.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cohort_e2e::agent::TestAgent;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd};
use cohort_proto::agent::{CreateInstance, Instance, InstanceSource, Limits, SshAccess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn student_key_logs_in_over_the_proxy_port_and_others_are_refused() {
    let lxd = TestLxd::new();
    let agent = TestAgent::start(&lxd).await;
    let ports = PortRange::claim();
    let port = ports.port(0);
    let key = SshKey::generate();
    let stranger = SshKey::generate();

    let req = CreateInstance {
        idempotency_key: "op-ssh".into(),
        name: "cs101-alice".into(),
        source: InstanceSource::Image {
            alias: "cohort/base".into(),
        },
        limits: Limits {
            cpu: 1,
            memory_mib: 512,
            disk_gib: 2,
        },
        gpus: Vec::new(),
        ssh: Some(SshAccess {
            username: "alice".into(),
            authorized_keys: vec![key.public_key()],
            password_hash: None,
            sudo: true,
            listen_address: "127.0.0.1".into(),
            port,
        }),
        home_volume: Some("home-alice".into()),
        home_mib: Some(64),
        home_snapshots: None,
        config: BTreeMap::new(),
        start: true,
        network_policy: None,
    };
    let started = Instant::now();
    let resp = agent
        .controller()
        .post(agent.url("/v1/instances"))
        .json(&req)
        .send()
        .await
        .expect("POST /v1/instances");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert_eq!(status, 201, "create failed: {text}");
    eprintln!("create with SSH, ready: {:?}", started.elapsed());
    let inst: Instance = serde_json::from_str(&text).expect("Instance JSON");
    assert!(inst.ssh_ready, "reported before sshd answered");
    // Where LXD would remap the new container's files on its first start, the agent moved them
    // first (`a_new_container_is_shifted_before_its_first_start...` checks LXD then leaves them).
    assert_eq!(
        agent.node.first_start_shifts().count,
        u64::from(agent.node.lxd_remaps_first_start())
    );
    assert_eq!(inst.ssh_port, Some(port));
    assert_eq!(inst.ssh_listen.as_deref(), Some("127.0.0.1"));

    // Ready means ready: the first login attempt must not need retries.
    let out = key.run(
        "127.0.0.1",
        port,
        "alice",
        "whoami; id -u; pwd; sudo -n true && echo sudo-ok; findmnt -n -o TARGET /home/alice",
    );
    assert!(
        out.status.success(),
        "ssh login failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "alice\n1000\n/home/alice\nsudo-ok\n/home/alice\n"
    );

    // The host key is the one the agent wrote before the first boot, and the only one served:
    // a student who copies it into known_hosts logs in with strict checking, and the image's
    // first-boot key generation (RSA, ECDSA) never ran.
    let host_key = inst.ssh_host_key.as_deref().expect("ssh_host_key reported");
    assert!(host_key.starts_with("ssh-ed25519 "), "{host_key}");
    let out = key.run_verified(
        "127.0.0.1",
        port,
        host_key,
        "alice",
        "ls /etc/ssh | grep '^ssh_host_' | tr '\\n' ' '",
    );
    assert!(
        out.status.success(),
        "strict host key check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ssh_host_ed25519_key ssh_host_ed25519_key.pub "
    );
    // The image's lean boot (images/base/customize.sh): the boot finished with nothing failed;
    // what a container has no use for is masked (the ext4 scrub, module loading, the remount)
    // and never ran; sysusers did not run again on a first boot; sshd and the journal run, the
    // journal persistent and bounded; apt's own check passes.
    // (systemctl as root, by sudo: the image has no D-Bus for a user's systemctl.)
    let out = key.run(
        "127.0.0.1",
        port,
        "alice",
        "s='sudo -n systemctl'; timeout 60 $s is-system-running --wait; $s --failed --no-legend --plain | wc -l; \
         $s show -p LoadState --value e2scrub_reap.service systemd-modules-load.service \
           systemd-remount-fs.service modprobe@fuse.service | xargs; \
         $s show -p ActiveState --value systemd-sysusers.service ssh.service \
           systemd-journald.service | xargs; \
         systemd-analyze cat-config systemd/journald.conf | grep -x -e SystemMaxUse=64M -e RuntimeMaxUse=16M | wc -l; \
         test -d /var/log/journal && echo persistent; sudo -n apt-get check -qq && echo apt-ok",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "running\n0\nmasked masked masked masked\ninactive active active\n2\npersistent\napt-ok\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = cohort_e2e::ssh::SshKey::generate().public_key();
    let spoofed = key.run_verified("127.0.0.1", port, &other, "alice", "whoami");
    assert_eq!(
        spoofed.status.code(),
        Some(255),
        "a wrong host key was accepted"
    );
    assert!(
        String::from_utf8_lossy(&spoofed.stderr).contains("HOST IDENTIFICATION HAS CHANGED")
            || String::from_utf8_lossy(&spoofed.stderr).contains("Host key verification failed"),
        "{}",
        String::from_utf8_lossy(&spoofed.stderr)
    );

    let refused = stranger.run("127.0.0.1", port, "alice", "whoami");
    assert_eq!(refused.status.code(), Some(255), "a key never given got in");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Permission denied"));
    assert!(refused.stdout.is_empty());

    // The home volume is kept when the instance goes.
    let del = agent
        .controller()
        .delete(agent.url("/v1/instances/cs101-alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        del.status(),
        204,
        "{}",
        del.text().await.unwrap_or_default()
    );
    assert!(lxd.instance_names().is_empty());
    let vols = lxd.lxc(&[
        "storage", "volume", "list", "cohort", "-f", "csv", "-c", "n",
    ]);
    assert!(
        vols.lines().any(|l| l.trim() == "home-alice"),
        "home volume gone: {vols}"
    );
    // Made again (stopped, so at once) with another home size: the kept volume takes it.
    let size = || lxd.lxc(&["storage", "volume", "get", "cohort", "home-alice", "size"]);
    assert_eq!(size().trim(), "64MiB");
    let again = CreateInstance {
        idempotency_key: "op-ssh-again".into(),
        home_mib: Some(128),
        home_snapshots: None,
        start: false,
        ..req.clone()
    };
    let made = agent
        .controller()
        .post(agent.url("/v1/instances"))
        .json(&again)
        .send()
        .await
        .expect("POST /v1/instances");
    assert_eq!(
        made.status(),
        201,
        "{}",
        made.text().await.unwrap_or_default()
    );
    assert_eq!(size().trim(), "128MiB");
    let del = agent
        .controller()
        .delete(agent.url("/v1/instances/cs101-alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 204);
    // Nothing answers on the port once the instance is gone.
    assert!(
        !cohort_agent::guest::ssh::sshd_answers("127.0.0.1", port, Duration::from_millis(500))
            .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_students_in_parallel_are_all_ready_and_log_in() {
    let lxd = TestLxd::new();
    // Two creates at a time, so the bound on concurrent creates is exercised too.
    let agent = TestAgent::start_with(&lxd, |c| c.max_concurrent_creates = Some(2)).await;
    let ports = PortRange::claim();
    let key = SshKey::generate();
    let requests: Vec<CreateInstance> = (0..6u16)
        .map(|i| CreateInstance {
            idempotency_key: format!("op-{i}"),
            name: format!("lab-s{i}"),
            source: InstanceSource::Image {
                alias: "cohort/base".into(),
            },
            limits: Limits {
                cpu: 1,
                memory_mib: 256,
                disk_gib: 2,
            },
            gpus: Vec::new(),
            ssh: Some(SshAccess {
                username: format!("s{i}"),
                authorized_keys: vec![key.public_key()],
                password_hash: None,
                sudo: false,
                listen_address: "127.0.0.1".into(),
                port: ports.port(i),
            }),
            home_volume: None,
            home_mib: None,
            home_snapshots: None,
            config: BTreeMap::new(),
            start: true,
            network_policy: None,
        })
        .collect();
    let client = agent.controller();
    let started = Instant::now();
    let answers = futures_util::future::join_all(
        requests
            .iter()
            .map(|r| client.post(agent.url("/v1/instances")).json(r).send()),
    )
    .await;
    let elapsed = started.elapsed();
    for (r, a) in requests.iter().zip(answers) {
        let a = a.expect("POST");
        assert_eq!(
            a.status(),
            201,
            "{}: {}",
            r.name,
            a.text().await.unwrap_or_default()
        );
        let inst: Instance = a.json().await.unwrap();
        assert!(inst.ssh_ready, "{} not ready", r.name);
    }
    eprintln!("6 instances with SSH, all ready: {elapsed:?}");
    for i in 0..6u16 {
        let out = key.run("127.0.0.1", ports.port(i), &format!("s{i}"), "hostname");
        assert!(
            out.status.success(),
            "s{i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("lab-s{i}\n"));
    }

    // Each got an isolated range the agent picked inside root's subordinate ids, which LXD used
    // as given, and no other container on the daemon (any project) holds the same one.
    let host = cohort_agent::idmap::host_range(
        std::path::Path::new("/etc/subuid"),
        std::path::Path::new("/etc/subgid"),
    )
    .expect("root has subordinate ids");
    let mut ours = Vec::new();
    for i in 0..6u16 {
        let name = format!("lab-s{i}");
        let base: u64 = lxd
            .lxc(&["config", "get", &name, "security.idmap.base"])
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}: no security.idmap.base ({e})"));
        let used = lxd.lxc(&["config", "get", &name, "volatile.idmap.base"]);
        assert_eq!(
            used.trim(),
            base.to_string(),
            "{name}: LXD used another range"
        );
        assert!(
            base >= host.start + cohort_agent::idmap::RANGE_SIZE
                && base + cohort_agent::idmap::RANGE_SIZE <= host.start + host.size,
            "{name}: range {base} outside root's {host:?}"
        );
        ours.push((name, base));
    }
    let listing: Vec<serde_json::Value> = serde_json::from_str(&cohort_e2e::lxd::lxc(&[
        "query",
        "/1.0/instances?all-projects=true&recursion=1",
    ]))
    .expect("listing of every project");
    for (name, base) in &ours {
        let same: Vec<_> = listing
            .iter()
            .filter(|inst| {
                inst["config"]["volatile.idmap.base"].as_str() == Some(&base.to_string())
            })
            .map(|inst| format!("{}/{}", inst["project"], inst["name"]))
            .collect();
        assert_eq!(same.len(), 1, "{name}: range {base} held by {same:?}");
    }
}

/// The host key goes into a new container before its first boot. Copies of a template that was
/// started (its files in the template's range) get theirs as the container's root; and where the
/// template's `/etc/ssh/sshd_config.d` is a link to a path that also exists on the host, the
/// agent, root on the host, must not write through it: the files go in through LXD, inside the
/// container, and the host's directory stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_a_template_get_their_host_key_and_a_link_in_it_never_leads_out() {
    let lxd = TestLxd::new();
    let agent = TestAgent::start(&lxd).await;
    let ports = PortRange::claim();
    let key = SshKey::generate();
    let spec = |name: &str, source: InstanceSource, port: Option<u16>| CreateInstance {
        idempotency_key: format!("op-{name}"),
        name: name.into(),
        source,
        limits: Limits {
            cpu: 1,
            memory_mib: 256,
            disk_gib: 2,
        },
        gpus: Vec::new(),
        ssh: port.map(|port| SshAccess {
            username: "s".into(),
            authorized_keys: vec![key.public_key()],
            password_hash: None,
            sudo: false,
            listen_address: "127.0.0.1".into(),
            port,
        }),
        home_volume: None,
        home_mib: None,
        home_snapshots: None,
        config: BTreeMap::new(),
        start: true,
        network_policy: None,
    };
    let create = |req: CreateInstance| {
        let client = agent.controller();
        let url = agent.url("/v1/instances");
        async move {
            let resp = client.post(url).json(&req).send().await.expect("POST");
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            assert_eq!(status, 201, "{}: {text}", req.name);
            serde_json::from_str::<Instance>(&text).expect("Instance JSON")
        }
    };
    let image = InstanceSource::Image {
        alias: "cohort/base".into(),
    };
    let copy_of = |template: &str| InstanceSource::Copy {
        template: template.into(),
    };
    let logs_in = |inst: &Instance, port: u16| {
        let host_key = inst.ssh_host_key.as_deref().expect("ssh_host_key reported");
        let out = key.run_verified("127.0.0.1", port, host_key, "s", "cat /etc/hostname");
        assert!(
            out.status.success(),
            "{}: {}",
            inst.name,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", inst.name)
        );
    };

    // A template started once (its files now in its own range), then stopped. Forced: a
    // container stopped moments after its start may not yet heed the clean-shutdown signal, and
    // `lxc stop` would wait for ever; a template has nothing running to save.
    create(spec("tpl", image, None)).await;
    lxd.lxc(&["stop", "--force", "tpl"]);
    let a = create(spec("copy-a", copy_of("tpl"), Some(ports.port(0)))).await;
    logs_in(&a, ports.port(0));

    // The template's drop-in directory made a link to an absolute path that exists both in the
    // container and on the host.
    let host_dir = tempfile::Builder::new()
        .prefix("cohort-link-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::write(host_dir.path().join("sentinel"), "the host's\n").unwrap();
    let target = host_dir.path().to_str().unwrap();
    lxd.lxc(&["start", "tpl"]);
    lxd.lxc(&[
        "exec",
        "tpl",
        "--",
        "sh",
        "-c",
        &format!(
            "mkdir -p {target} && rm -rf /etc/ssh/sshd_config.d && \
             ln -s {target} /etc/ssh/sshd_config.d"
        ),
    ]);
    lxd.lxc(&["stop", "--force", "tpl"]);
    let b = create(spec("copy-b", copy_of("tpl"), Some(ports.port(1)))).await;
    logs_in(&b, ports.port(1));
    assert_ne!(a.ssh_host_key, b.ssh_host_key, "every copy has its own key");
    let mut on_host: Vec<_> = std::fs::read_dir(host_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_host.sort();
    assert_eq!(on_host, ["sentinel"], "the agent wrote through the link");
    let inside = lxd.lxc(&["exec", "copy-b", "--", "ls", target]);
    assert_eq!(
        inside, "cohort-host-key.conf\n",
        "the drop-in went in through LXD"
    );
}
