//! `cohort course create|list|show|set|limits|roster|provision|endpoints|teardown|delete|copy`,
//! flags as in DESIGN.md, `cohort course student ...` for one student's container and
//! `cohort course staff add|rm`.

use clap::{Args, Subcommand, ValueEnum};

use super::{TableFormat, WaitFlags};

#[derive(Debug, Args)]
pub struct Course {
    #[command(subcommand)]
    pub command: CourseCommand,
}

#[derive(Debug, Subcommand)]
pub enum CourseCommand {
    /// Create a course
    Create(Box<CourseCreate>),
    /// List courses
    #[command(visible_alias = "ls")]
    List(CourseList),
    /// Show a course (YAML)
    Show(CourseCode),
    /// Change a course's network policy; applied to its running containers at once
    Set(CourseSet),
    /// Change each student's cores, memory and disk; containers made from now on take them
    Limits(CourseLimitsArgs),
    /// Import a roster (CSV with header username,name,email,ssh_key, or a JSON array)
    Roster(CourseRoster),
    /// Create one container per student; idempotent
    Provision(CourseProvision),
    /// Export the students' SSH endpoints
    Endpoints(CourseEndpoints),
    /// Stop or delete all of a course's containers
    Teardown(CourseTeardown),
    /// Remove a course torn down with --delete (its instructor or an admin)
    Delete(CourseDelete),
    /// One student's container: start, stop, restart, reset, snapshot, restore; or a new password
    Student(CourseStudent),
    /// The course's datasets, mounted at /data/NAME in its containers: push, list, rm, quota
    Data(super::course_data::CourseData),
    /// Give other instructors or teaching assistants the course's instructor rights (add|rm)
    Staff(CourseStaff),
    /// Make next term's course from this one: same settings and staff, no students
    Copy(CourseCopy),
    /// Grant one student extra GPU hours for the current budget period (its instructor, admin)
    Grant(CourseGrant),
    /// Export every student's home as a .tar.gz kept for download (--list, --download DIR)
    Archive(super::course_archive::CourseArchiveArgs),
}

#[derive(Debug, Args)]
pub struct CourseGrant {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub user: String,
    /// Extra GPU hours, e.g. 2 or 0.5
    #[arg(allow_hyphen_values = true)]
    pub hours: String,
}

/// A course's GPU budget, counted on allocated GPU time.
#[derive(Debug, Args)]
pub struct BudgetFlags {
    /// GPU hours each student may hold a GPU per --budget-period (e.g. 10 or 0.5; "none" in
    /// `course set` removes the budget). Told at 80 %, GPU detached at 100 %
    #[arg(long, value_name = "HOURS", allow_hyphen_values = true)]
    pub gpu_hours_per_student: Option<String>,
    /// The budget's period: week (default; from Monday 00:00 UTC), month or course
    #[arg(long, value_name = "week|month|course")]
    pub budget_period: Option<String>,
}

#[derive(Debug, Args)]
pub struct CourseStaff {
    #[command(subcommand)]
    pub command: StaffCommand,
}

#[derive(Debug, Subcommand)]
pub enum StaffCommand {
    /// Add an account (with the instructor role) to the course's staff
    Add(StaffTarget),
    /// Remove an account from the course's staff
    #[command(visible_alias = "remove")]
    Rm(StaffTarget),
}

#[derive(Debug, Args)]
pub struct StaffTarget {
    /// [<remote>:]<code>
    pub code: String,
    /// The staff member's username
    pub username: String,
}

#[derive(Debug, Args)]
pub struct CourseCopy {
    /// [<remote>:]<code> of the course to copy
    pub old: String,
    /// The new course's code
    pub new: String,
    /// The new course's title (default: the old one's)
    #[arg(long)]
    pub title: Option<String>,
}

#[derive(Debug, Args)]
pub struct CourseStudent {
    #[command(subcommand)]
    pub command: StudentCommand,
}

#[derive(Debug, Subcommand)]
pub enum StudentCommand {
    /// Start a student's container
    Start(StudentTarget),
    /// Stop a student's container
    Stop(StudentTarget),
    /// Restart a student's container
    Restart(StudentTarget),
    /// Re-create a student's container from the template (the home volume is kept)
    Reset(StudentTarget),
    /// Snapshot a student's container (default name: snap-<UTC time>)
    Snapshot(StudentSnapshot),
    /// Restore a student's container to a snapshot
    Restore(StudentRestore),
    /// List the snapshots of a student's container
    Snapshots(StudentSnapshots),
    /// Issue a new generated password and print it once (only to an account this course's
    /// roster created whose owner never set credentials of their own)
    Password(StudentAccount),
    /// Unenrol a student and delete their container (the home volume is kept unless
    /// --delete-home)
    Remove(StudentRemove),
}

#[derive(Debug, Args)]
pub struct StudentRemove {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub username: String,
    /// Delete the student's home volume too
    #[arg(long)]
    pub delete_home: bool,
    /// Don't ask for confirmation (asked only with --delete-home)
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub wait: WaitFlags,
}

#[derive(Debug, Args)]
pub struct StudentAccount {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub username: String,
}

#[derive(Debug, Args)]
pub struct StudentTarget {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub username: String,
    #[command(flatten)]
    pub wait: WaitFlags,
}

#[derive(Debug, Args)]
pub struct StudentSnapshot {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub username: String,
    /// Snapshot name
    pub snapshot: Option<String>,
}

#[derive(Debug, Args)]
pub struct StudentRestore {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub username: String,
    /// Snapshot name
    pub snapshot: String,
}

#[derive(Debug, Args)]
pub struct StudentSnapshots {
    /// [<remote>:]<code>
    pub code: String,
    /// The student's username
    pub username: String,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct CourseCreate {
    /// [<remote>:]<code>
    pub code: String,
    /// Course title
    #[arg(long)]
    pub title: String,
    /// Template image alias
    #[arg(long)]
    pub image: String,
    /// CPU cores per student
    #[arg(long)]
    pub cpu: Option<u32>,
    /// Memory per student, e.g. 4GiB
    #[arg(long)]
    pub memory: Option<String>,
    /// Root disk per student, e.g. 20GiB
    #[arg(long)]
    pub disk: Option<String>,
    /// GPUs per student
    #[arg(long)]
    pub gpus: Option<u32>,
    /// GPU model, e.g. A100
    #[arg(long)]
    pub gpu_model: Option<String>,
    /// "exclusive" or N: how many students may share one GPU
    #[arg(long, value_name = "exclusive|N")]
    pub gpu_share: Option<String>,
    /// Sharing GPUs: each student's GPU memory cap, e.g. 8GiB (default: the card's over N)
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory: Option<String>,
    /// Most processes in each student's container (limits.processes)
    #[arg(long)]
    pub processes: Option<u32>,
    /// Size of each student's home volume, e.g. 10GiB or 512MiB (default: the controller's)
    #[arg(long, value_name = "SIZE")]
    pub home_size: Option<String>,
    /// Snapshots of each student's home, made by the daemon: off (default), daily or hourly
    #[arg(long, value_name = "off|daily|hourly")]
    pub home_snapshots: Option<String>,
    /// How many scheduled snapshots of each home are kept, 1 to 100 (default 7)
    #[arg(long, value_name = "N")]
    pub home_snapshots_keep: Option<u32>,
    /// Days each student's archived home is kept, 1 to 3650 (default: the controller's
    /// COHORT_ARCHIVE_DAYS, 90)
    #[arg(long, value_name = "N")]
    pub archive_days: Option<u32>,
    /// First day, YYYY-MM-DD or RFC 3339
    #[arg(long)]
    pub starts: Option<String>,
    /// Last day, YYYY-MM-DD or RFC 3339
    #[arg(long)]
    pub ends: Option<String>,
    /// Instructor who owns the course (admins; default: you)
    #[arg(long)]
    pub instructor: Option<String>,
    /// Stop a container after this many minutes without GPU use (default: never)
    #[arg(long)]
    pub idle_gpu_minutes: Option<u32>,
    /// Stop a container after it has run this many minutes (default: never)
    #[arg(long)]
    pub max_runtime_minutes: Option<u32>,
    /// What --idle-gpu-minutes does: stop the container, or detach its GPUs and leave it running
    #[arg(long, value_name = "stop|detach")]
    pub idle_action: Option<String>,
    /// Minutes of warning before an idle stop, idle GPU detach or longest-run stop, 0 to 1440
    /// (default 10)
    #[arg(long, value_name = "MINUTES")]
    pub warn_minutes: Option<u32>,
    #[command(flatten)]
    pub network: NetworkFlags,
    #[command(flatten)]
    pub budget: BudgetFlags,
}

/// The students' network: where their containers may connect, and who may reach their SSH.
#[derive(Debug, Args)]
pub struct NetworkFlags {
    /// Where containers may connect: open (default), none, or CIDR[:PORT],... (e.g. only the
    /// campus mirror: 10.1.2.3/32:443)
    #[arg(long, value_name = "open|none|CIDR[:PORT],...")]
    pub egress: Option<String>,
    /// Who may reach the students' SSH: anywhere (default) or CIDR,...
    #[arg(long, value_name = "anywhere|CIDR,...")]
    pub ssh_from: Option<String>,
}

#[derive(Debug, Args)]
pub struct CourseSet {
    /// [<remote>:]<code>
    pub code: String,
    /// Size of each student's home volume (e.g. 10GiB), or "default"; a home takes it when its
    /// container is next made
    #[arg(long, value_name = "SIZE|default")]
    pub home_size: Option<String>,
    /// Snapshots of each student's home, made by the daemon: off (default), daily or hourly
    #[arg(long, value_name = "off|daily|hourly")]
    pub home_snapshots: Option<String>,
    /// How many scheduled snapshots of each home are kept, 1 to 100 (default 7)
    #[arg(long, value_name = "N")]
    pub home_snapshots_keep: Option<u32>,
    /// Days each student's archived home is kept, 1 to 3650, for the archives made from now on
    #[arg(long, value_name = "N")]
    pub archive_days: Option<u32>,
    /// Whether the course's instructors may open its students' JupyterLab in the portal
    #[arg(long, value_name = "true|false")]
    pub jupyter_instructors: Option<bool>,
    /// Minutes of warning before an idle stop, idle GPU detach or longest-run stop, 0 to 1440
    #[arg(long, value_name = "MINUTES")]
    pub warn_minutes: Option<u32>,
    #[command(flatten)]
    pub network: NetworkFlags,
    #[command(flatten)]
    pub budget: BudgetFlags,
    #[command(flatten)]
    pub gpu_mode: super::gpu::GpuModeFlags,
}

#[derive(Debug, Args)]
pub struct CourseLimitsArgs {
    /// [<remote>:]<code>
    pub code: String,
    /// CPU cores per student
    #[arg(long)]
    pub cpu: Option<u32>,
    /// Memory per student, e.g. 4GiB
    #[arg(long)]
    pub memory: Option<String>,
    /// Root disk per student, e.g. 20GiB
    #[arg(long)]
    pub disk: Option<String>,
}

#[derive(Debug, Args)]
pub struct CourseList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct CourseCode {
    /// [<remote>:]<code>
    pub code: String,
}

#[derive(Debug, Args)]
pub struct CourseRoster {
    /// [<remote>:]<code>
    pub code: String,
    /// Roster file: CSV or JSON (by extension or content); "-" reads stdin
    pub file: String,
}

#[derive(Debug, Args)]
pub struct CourseProvision {
    /// [<remote>:]<code>
    pub code: String,
    #[command(flatten)]
    pub wait: WaitFlags,
}

/// `course endpoints --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EndpointFormat {
    Csv,
    Json,
    SshConfig,
    KnownHosts,
}

#[derive(Debug, Args)]
pub struct CourseEndpoints {
    /// [<remote>:]<code>
    pub code: String,
    /// Format (csv|json|ssh-config|known-hosts)
    #[arg(short, long, value_enum, default_value = "csv")]
    pub format: EndpointFormat,
}

#[derive(Debug, Args)]
pub struct CourseDelete {
    /// [<remote>:]<code>
    pub code: String,
    /// Delete the students' archived homes with it (refused while any is kept otherwise)
    #[arg(long)]
    pub delete_archives: bool,
    /// Don't ask for confirmation
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CourseTeardown {
    /// [<remote>:]<code>
    pub code: String,
    /// Delete the containers instead of stopping them
    #[arg(long)]
    pub delete: bool,
    /// Keep the students' home volumes when deleting
    #[arg(long)]
    pub keep_homes: bool,
    /// First archive every student's home for download (as `course archive`); a home whose
    /// archive failed is kept
    #[arg(long)]
    pub archive: bool,
    /// Don't ask for confirmation
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub wait: WaitFlags,
}
