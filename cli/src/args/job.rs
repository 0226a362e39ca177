//! `cohort job submit|list|show|logs|cancel|priority|limits`: batch jobs, a command run to
//! completion in the student's own container (Cohort's own verb, issue 44; Slurm's `sbatch`,
//! `squeue`, `scancel` are the model).

use clap::{Args, Subcommand};

use super::TableFormat;

#[derive(Debug, Args)]
pub struct Job {
    #[command(subcommand)]
    pub command: JobCommand,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Run a command in your container as you, once its turn comes (with a GPU when --gpus):
    /// cohort job submit NAME --gpus 1 --hours 4 -- python train.py
    Submit(JobSubmit),
    /// The jobs you may see, newest first
    List(JobList),
    /// One job: its state, place and why it waits, node, GPU, times, exit code, GPU-seconds
    Show(JobTarget),
    /// A job's output (stdout and stderr); -f follows it until the job ends
    Logs(JobLogs),
    /// Cancel a job: a waiting one at once, a running one is stopped
    Cancel(JobTarget),
    /// Move a job up (or down) its queue, -100 to 100 (its course's staff, admin)
    Priority(JobPriority),
    /// Set each student's jobs running and waiting at once in a course (defaults 1 and 5)
    Limits(JobLimits),
}

#[derive(Debug, Args)]
pub struct JobSubmit {
    /// [<remote>:]<instance>: your container
    pub name: String,
    /// GPUs for the job (0: none, runs at once)
    #[arg(long, default_value_t = 0)]
    pub gpus: u32,
    /// Its time limit in hours (default 2, at most the course's gpu_lease_max_hours with GPUs)
    #[arg(long, allow_hyphen_values = true)]
    pub hours: Option<String>,
    /// Where it runs: a directory in your home (default the home)
    #[arg(long)]
    pub workdir: Option<String>,
    /// An environment variable for it, K=V (repeatable)
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Print only the job's id
    #[arg(long)]
    pub id_only: bool,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct JobList {
    /// [<remote>:]
    pub remote: Option<String>,
    #[arg(long)]
    pub course: Option<String>,
    #[arg(long)]
    pub user: Option<String>,
    /// queued, starting, running, unknown, succeeded, failed, cancelled or killed
    #[arg(long)]
    pub state: Option<String>,
    /// Format (table|csv|json, also yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct JobTarget {
    /// [<remote>:]<job id>
    pub id: String,
}

#[derive(Debug, Args)]
pub struct JobLogs {
    /// [<remote>:]<job id>
    pub id: String,
    /// Follow the log until the job ends
    #[arg(short, long)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct JobPriority {
    /// [<remote>:]<job id>
    pub id: String,
    /// -100 to 100; higher goes first
    #[arg(allow_hyphen_values = true)]
    pub priority: String,
}

#[derive(Debug, Args)]
pub struct JobLimits {
    /// [<remote>:]<course>
    pub course: String,
    /// Jobs running at once per student (1 to 100)
    #[arg(long)]
    pub running: i32,
    /// Jobs waiting at once per student (0 to 1000)
    #[arg(long)]
    pub queued: i32,
}
