//! A real OpenLDAP server (Debian's `slapd`) for one test: its own config, data and TLS
//! certificate (from a test CA) in a temporary directory, seeded with `slapadd` before it starts,
//! serving `ldaps://` on a loopback port the test chose, stopped on drop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::TestCa;

/// The directory's suffix.
pub const BASE: &str = "dc=uni,dc=test";
/// Where people are.
pub const PEOPLE: &str = "ou=people,dc=uni,dc=test";
/// The group whose members are instructors.
pub const INSTRUCTORS: &str = "cn=instructors,ou=groups,dc=uni,dc=test";
/// The service account the controller searches with, and its password.
pub const SERVICE_DN: &str = "cn=cohort,ou=services,dc=uni,dc=test";
pub const SERVICE_PASSWORD: &str = "service account secret";

/// Someone in the directory.
pub struct Person<'a> {
    pub uid: &'a str,
    pub name: &'a str,
    pub password: &'a str,
    pub instructor: bool,
}

pub struct Slapd {
    child: Child,
    dir: tempfile::TempDir,
    pub url: String,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `{SSHA}` hash of a password, as an administrator would store it.
fn hashed(password: &str) -> String {
    run(Command::new("slappasswd").args(["-s", password]))
}

fn config(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {d}/slapd.pid
argsfile {d}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCertificateFile {d}/cert.pem
TLSCertificateKeyFile {d}/key.pem
database mdb
suffix \"{BASE}\"
rootdn \"cn=admin,{BASE}\"
directory {d}/data
access to attrs=userPassword by anonymous auth by self read by * none
access to * by users read by * none
"
    )
}

fn seed(people: &[Person<'_>]) -> String {
    let mut ldif = format!(
        "dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\no: Uni\ndc: uni\n\n\
         dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n\n\
         dn: ou=groups,{BASE}\nobjectClass: organizationalUnit\nou: groups\n\n\
         dn: ou=services,{BASE}\nobjectClass: organizationalUnit\nou: services\n\n\
         dn: {SERVICE_DN}\nobjectClass: applicationProcess\nobjectClass: simpleSecurityObject\n\
         cn: cohort\nuserPassword: {}\n\n",
        hashed(SERVICE_PASSWORD)
    );
    for p in people {
        let surname = p.name.split(' ').next_back().unwrap_or(p.name);
        ldif += &format!(
            "dn: uid={uid},{PEOPLE}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {name}\n\
             sn: {surname}\nmail: {uid}@uni.test\nuserPassword: {hash}\n\n",
            uid = p.uid,
            name = p.name,
            hash = hashed(p.password)
        );
    }
    ldif += &format!("dn: {INSTRUCTORS}\nobjectClass: groupOfNames\ncn: instructors\n");
    // groupOfNames needs a member; the service account stands in when there is no instructor.
    ldif += &format!("member: {SERVICE_DN}\n");
    for p in people.iter().filter(|p| p.instructor) {
        ldif += &format!("member: uid={},{PEOPLE}\n", p.uid);
    }
    ldif
}

impl Slapd {
    /// Starts slapd on `ldaps://127.0.0.1:{port}` with `people` in it.
    pub fn start(port: u16, people: &[Person<'_>]) -> Self {
        let dir = tempfile::tempdir().expect("slapd dir");
        let ca = TestCa::new("Directory test CA");
        let leaf = ca.leaf("127.0.0.1", "directory", false);
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("ca");
        std::fs::write(dir.path().join("cert.pem"), &leaf.cert_pem).expect("cert");
        std::fs::write(dir.path().join("key.pem"), &leaf.key_pem).expect("key");
        std::fs::create_dir(dir.path().join("data")).expect("data dir");
        let conf = dir.path().join("slapd.conf");
        std::fs::write(&conf, config(dir.path())).expect("slapd.conf");
        let mut slapadd = Command::new("slapadd")
            .arg("-f")
            .arg(&conf)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run slapadd (scripts/setup installs slapd)");
        slapadd
            .stdin
            .take()
            .expect("stdin")
            .write_all(seed(people).as_bytes())
            .expect("seed");
        let out = slapadd.wait_with_output().expect("slapadd");
        assert!(
            out.status.success(),
            "slapadd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = format!("ldaps://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("slapd.log")).expect("log");
        // `-d 0`: stay in the foreground (a child this test owns), log nothing extra.
        let child = Command::new("slapd")
            .arg("-f")
            .arg(&conf)
            .args(["-h", &format!("{url}/"), "-d", "0"])
            .stdout(Stdio::from(log.try_clone().expect("log fd")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start slapd");
        let mut slapd = Slapd { child, dir, url };
        slapd.wait_listening(port);
        slapd
    }

    fn wait_listening(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("slapd exited ({status}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "slapd not listening: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The CA file the directory's certificate chains to.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("slapd.log")).unwrap_or_default()
    }

    /// The controller's environment for this directory: search as the service account, the
    /// instructors group mapped to the instructor role.
    pub fn controller_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("COHORT_LDAP_URL", self.url.clone()),
            ("COHORT_LDAP_CA_FILE", self.ca_file().display().to_string()),
            ("COHORT_LDAP_SEARCH_BASE", PEOPLE.into()),
            ("COHORT_LDAP_BIND_DN", SERVICE_DN.into()),
            ("COHORT_LDAP_BIND_PASSWORD", SERVICE_PASSWORD.into()),
            ("COHORT_LDAP_INSTRUCTOR_GROUP", INSTRUCTORS.into()),
        ]
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
