//! The portal's languages and its message catalog: English, Traditional and Simplified Chinese,
//! chosen from the `lang` cookie the switcher sets, else from `Accept-Language`.

use actix_web::HttpRequest;

/// Name of the cookie that keeps a chosen language.
pub const LANG_COOKIE: &str = "cohort_lang";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    ZhHant,
    ZhHans,
}

impl Lang {
    pub const ALL: [Lang; 3] = [Lang::En, Lang::ZhHant, Lang::ZhHans];

    /// The BCP 47 tag, for `<html lang>` and the switcher.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhHant => "zh-Hant",
            Lang::ZhHans => "zh-Hans",
        }
    }

    /// The language's name in itself, for the switcher.
    pub fn own_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::ZhHant => "繁體中文",
            Lang::ZhHans => "简体中文",
        }
    }

    pub fn from_tag(tag: &str) -> Option<Lang> {
        Lang::ALL
            .into_iter()
            .find(|l| l.tag().eq_ignore_ascii_case(tag))
    }

    /// One `Accept-Language` range: Chinese as spoken in Taiwan, Hong Kong and Macau, or written
    /// Hant, is Traditional; other Chinese is Simplified; English is English.
    fn from_range(range: &str) -> Option<Lang> {
        let range = range.to_ascii_lowercase();
        let mut parts = range.split('-');
        match parts.next()? {
            "en" => Some(Lang::En),
            "zh" => {
                let rest: Vec<&str> = parts.collect();
                let traditional = rest
                    .iter()
                    .any(|p| matches!(*p, "hant" | "tw" | "hk" | "mo"));
                Some(if traditional {
                    Lang::ZhHant
                } else {
                    Lang::ZhHans
                })
            }
            _ => None,
        }
    }

    /// The best of ours for an `Accept-Language` header, by its q-values; English if none fits.
    pub fn from_accept_language(header: &str) -> Lang {
        let mut ranges: Vec<(f32, usize, &str)> = header
            .split(',')
            .enumerate()
            .filter_map(|(i, item)| {
                let mut parts = item.trim().split(';');
                let range = parts.next()?.trim();
                let q = parts
                    .find_map(|p| p.trim().strip_prefix("q="))
                    .map_or(Some(1.0), |q| q.parse::<f32>().ok())?;
                (q > 0.0).then_some((q, i, range))
            })
            .collect();
        // Highest q first; the header's order breaks ties.
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranges
            .into_iter()
            .find_map(|(_, _, range)| Lang::from_range(range))
            .unwrap_or(Lang::En)
    }

    /// The language of a request: the switcher's cookie, else the browser's preference.
    pub fn of(req: &HttpRequest) -> Lang {
        req.cookie(LANG_COOKIE)
            .and_then(|c| Lang::from_tag(c.value()))
            .unwrap_or_else(|| {
                let header = req
                    .headers()
                    .get(actix_web::http::header::ACCEPT_LANGUAGE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                Lang::from_accept_language(header)
            })
    }

    /// The message `msg` in this language.
    pub fn t(self, msg: Msg) -> &'static str {
        let (en, hant, hans) = msg.texts();
        match self {
            Lang::En => en,
            Lang::ZhHant => hant,
            Lang::ZhHans => hans,
        }
    }
}

/// What a banner says of a reclaim announced for `reason` (the portal's and JupyterLab's).
pub fn reclaim_words(reason: &str, action: &str) -> Msg {
    match (reason, action) {
        ("max_runtime", _) => Msg::ReclaimMaxRuntime,
        ("lease_end", _) => Msg::ReclaimLeaseEnd,
        ("budget", _) => Msg::ReclaimBudget,
        (_, "detach") => Msg::ReclaimIdleDetach,
        _ => Msg::ReclaimIdleStop,
    }
}

/// Every text the portal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    Title,
    SignIn,
    SignOut,
    Username,
    Password,
    BadCredentials,
    TooManyFailures,
    DirectoryUnavailable,
    FormExpired,
    Forbidden,
    NotFound,
    SomethingFailed,
    Language,
    SignedInAs,
    MyContainers,
    NoContainers,
    Name,
    Status,
    Node,
    SshCommand,
    HostKey,
    Copy,
    Copied,
    Start,
    Stop,
    Restart,
    Back,
    StoppedBecause,
    GpusDetachedBecause,
    GpuBudgetWarning,
    GpuBudgetUsedUp,
    OpenJupyter,
    JupyterStarting,
    JupyterNeedsRunning,
    StoppedSince,
    Account,
    SshKeys,
    NoKeys,
    PublicKey,
    AddKey,
    Remove,
    ChangePassword,
    CurrentPassword,
    NewPassword,
    ApiTokens,
    NoTokens,
    NewToken,
    TokenShownOnce,
    Expires,
    ExpiresInDays,
    Expired,
    Revoke,
    Manage,
    Snapshots,
    NoSnapshots,
    SnapshotName,
    TakeSnapshot,
    Restore,
    Reset,
    ResetWarning,
    Teardown,
    TeardownStop,
    TeardownDelete,
    MyCourses,
    NoCourses,
    Code,
    CourseTitle,
    Provisioning,
    Class,
    Provision,
    Roster,
    RosterFile,
    RosterText,
    ImportRoster,
    Downloads,
    NewCourse,
    CreateCourse,
    Image,
    Cpu,
    MemoryMib,
    DiskGib,
    Actions,
    Admin,
    Nodes,
    Audit,
    AuditAction,
    AuditActor,
    Filter,
    When,
    Memory,
    Gpus,
    NoGpus,
    Containers,
    Model,
    InUse,
    UsedBy,
    GpuMemoryUsed,
    Cordon,
    Uncordon,
    Evacuate,
    EvacuateWarning,
    EvacuateHow,
    EvacuateStop,
    EvacuateMove,
    Queue,
    QueueEmpty,
    Priority,
    WaitingSince,
    Reason,
    UsersAndRoles,
    Role,
    ChangeRole,
    RoleStudent,
    RoleInstructor,
    RoleAdmin,
    Disabled,
    CreateContainer,
    YourAllowance,
    AtMostContainers,
    AllowanceUsed,
    NoImages,
    CatalogImage,
    CpuCores,
    GpuCount,
    GpuModel,
    AnyGpuModel,
    MemoryMibOwn,
    DiskGibOwn,
    AtMost,
    CourseLimits,
    GpusPerStudent,
    IdleStop,
    LongestRun,
    HomeMib,
    ControllerDefault,
    SaveLimits,
    LimitsApplyToNew,
    LimitsKept,
    WhyKept,
    ApplyingLimits,
    Container,
    NetworkPolicy,
    NetworkApplies,
    Egress,
    EgressOpen,
    EgressNone,
    EgressAllow,
    AllowList,
    SshFrom,
    SshFromList,
    Anywhere,
    SaveNetwork,
    TearingDown,
    TeardownConfirm,
    TeardownUnconfirmed,
    RosterRefused,
    RosterRow,
    RosterPasted,
    RosterWrong,
    RosterCreated,
    RosterEnrolled,
    RosterAlreadyEnrolled,
    RosterKeysIgnored,
    RosterNotInRoster,
    PasswordsShownOnce,
    RemoveStudent,
    RemoveStudentWarning,
    DeleteHome,
    Staff,
    Datasets,
    DataUsed,
    Size,
    Version,
    PushedBy,
    DatasetName,
    DatasetFile,
    Upload,
    Uploading,
    Uploaded,
    UploadNeedsScript,
    MyArchives,
    ArchivesNote,
    KeptUntil,
    ArchiveHomes,
    HomeSnapshots,
    NoHomeSnapshots,
    RestoreHomeWarning,
    GpuOnDemand,
    AttachGpu,
    GiveGpuBack,
    LeaveGpuQueue,
    LeaseHours,
    PlaceInQueue,
    GpuLeasedUntil,
    WarnBefore,
    ReclaimIdleStop,
    ReclaimIdleDetach,
    ReclaimMaxRuntime,
    ReclaimLeaseEnd,
    ReclaimBudget,
    BudgetCannotWait,
    KeepWorking,
    KeptWorking,
    RestorePath,
    RestorePathHint,
    RestorePathNote,
    Jobs,
    SubmitJob,
    JobContainer,
    JobCommand,
    JobCommandHint,
    JobGpus,
    JobHours,
    JobWorkdir,
    JobState,
    JobPlace,
    JobExit,
    JobLog,
    CancelJob,
    NoJobs,
    JobsNote,
    JobReason,
    AttachGpuAgain,
}

impl Msg {
    /// (English, Traditional Chinese, Simplified Chinese).
    fn texts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Msg::Title => ("Cohort GPU lab", "Cohort GPU 實驗室", "Cohort GPU 实验室"),
            Msg::SignIn => ("Sign in", "登入", "登录"),
            Msg::SignOut => ("Sign out", "登出", "退出登录"),
            Msg::Username => ("Username", "使用者名稱", "用户名"),
            Msg::Password => ("Password", "密碼", "密码"),
            Msg::BadCredentials => (
                "Wrong username or password.",
                "使用者名稱或密碼錯誤。",
                "用户名或密码错误。",
            ),
            Msg::DirectoryUnavailable => (
                "The university's directory cannot be reached. Try again later.",
                "目前無法連線到學校的目錄服務，請稍後再試。",
                "目前无法连接到学校的目录服务，请稍后再试。",
            ),
            Msg::TooManyFailures => (
                "Too many failed sign-ins from this address. Try again in a minute.",
                "此位址登入失敗次數過多，請一分鐘後再試。",
                "此地址登录失败次数过多，请一分钟后再试。",
            ),
            Msg::FormExpired => (
                "This form has expired or did not come from this site. Reload the page and try again.",
                "此表單已過期或並非來自本網站，請重新載入頁面後再試。",
                "此表单已过期或并非来自本网站，请刷新页面后重试。",
            ),
            Msg::Forbidden => (
                "You may not see this page.",
                "您無權查看此頁面。",
                "您无权查看此页面。",
            ),
            Msg::NotFound => ("Not found.", "找不到。", "未找到。"),
            Msg::SomethingFailed => ("Something failed.", "發生錯誤。", "发生错误。"),
            Msg::Language => ("Language", "語言", "语言"),
            Msg::SignedInAs => ("Signed in as", "目前登入：", "当前登录："),
            Msg::MyContainers => ("My containers", "我的容器", "我的容器"),
            Msg::NoContainers => (
                "You have no containers yet.",
                "您目前沒有容器。",
                "您还没有容器。",
            ),
            Msg::Name => ("Name", "名稱", "名称"),
            Msg::Status => ("Status", "狀態", "状态"),
            Msg::Node => ("Node", "節點", "节点"),
            Msg::SshCommand => ("SSH command", "SSH 指令", "SSH 命令"),
            Msg::HostKey => ("Host key", "主機金鑰", "主机密钥"),
            Msg::Copy => ("Copy", "複製", "复制"),
            Msg::Copied => ("Copied", "已複製", "已复制"),
            Msg::Start => ("Start", "啟動", "启动"),
            Msg::Stop => ("Stop", "停止", "停止"),
            Msg::Restart => ("Restart", "重新啟動", "重启"),
            Msg::Back => ("Back", "返回", "返回"),
            Msg::StoppedBecause => ("Stopped because", "停止原因", "停止原因"),
            Msg::GpusDetachedBecause => ("GPUs detached because", "GPU 卸除原因", "GPU 卸载原因"),
            Msg::GpuBudgetWarning => (
                "You have used 80 % of your GPU hours; at 100 % the GPU is detached (your container keeps running). GPU hours used",
                "您已用掉 80% 的 GPU 時數；用完時 GPU 會被卸除（容器繼續執行）。已用 GPU 時數",
                "您已用掉 80% 的 GPU 时数；用完时 GPU 会被卸载（容器继续运行）。已用 GPU 时数",
            ),
            Msg::GpuBudgetUsedUp => (
                "Your GPU hours are used up: the GPU was detached (your container keeps running). Your instructor can grant more. GPU hours used",
                "您的 GPU 時數已用完：GPU 已卸除（容器繼續執行）。授課教師可核發更多時數。已用 GPU 時數",
                "您的 GPU 时数已用完：GPU 已卸载（容器继续运行）。授课教师可授予更多时数。已用 GPU 时数",
            ),
            Msg::OpenJupyter => ("Open JupyterLab", "開啟 JupyterLab", "打开 JupyterLab"),
            Msg::JupyterStarting => (
                "JupyterLab in your container is starting. This page tries again by itself every few seconds.",
                "您容器中的 JupyterLab 正在啟動。此頁面每隔幾秒會自動重試。",
                "您容器中的 JupyterLab 正在启动。此页面每隔几秒会自动重试。",
            ),
            Msg::JupyterNeedsRunning => (
                "JupyterLab runs in your container, which is not running: start it to open JupyterLab.",
                "JupyterLab 在您的容器中執行，而容器未在執行：請先啟動它再開啟 JupyterLab。",
                "JupyterLab 在您的容器中运行，而容器未在运行：请先启动它再打开 JupyterLab。",
            ),
            Msg::StoppedSince => ("Stopped since", "停止時間", "停止时间"),
            Msg::Account => ("My account", "我的帳號", "我的账号"),
            Msg::SshKeys => ("My SSH keys", "我的 SSH 金鑰", "我的 SSH 密钥"),
            Msg::NoKeys => ("You have no SSH keys.", "您沒有 SSH 金鑰。", "您没有 SSH 密钥。"),
            Msg::PublicKey => (
                "Public key (one OpenSSH line)",
                "公開金鑰（一行 OpenSSH 格式）",
                "公钥（一行 OpenSSH 格式）",
            ),
            Msg::AddKey => ("Add key", "新增金鑰", "添加密钥"),
            Msg::Remove => ("Remove", "移除", "删除"),
            Msg::ChangePassword => ("Change password", "變更密碼", "修改密码"),
            Msg::CurrentPassword => ("Current password", "目前密碼", "当前密码"),
            Msg::NewPassword => ("New password", "新密碼", "新密码"),
            Msg::ApiTokens => ("API tokens", "API 權杖", "API 令牌"),
            Msg::NoTokens => ("You have no API tokens.", "您沒有 API 權杖。", "您没有 API 令牌。"),
            Msg::NewToken => ("New API token", "新增 API 權杖", "新建 API 令牌"),
            Msg::TokenShownOnce => (
                "Your new token. Copy it now: it is not shown again.",
                "這是您的新權杖。請立即複製：之後不會再顯示。",
                "这是您的新令牌。请立即复制：之后不会再显示。",
            ),
            Msg::Expires => ("Expires", "到期", "到期"),
            Msg::ExpiresInDays => ("Expires in (days)", "有效天數", "有效天数"),
            Msg::Expired => ("expired", "已過期", "已过期"),
            Msg::Revoke => ("Revoke", "撤銷", "撤销"),
            Msg::Manage => ("Manage", "管理", "管理"),
            Msg::Snapshots => ("Snapshots", "快照", "快照"),
            Msg::NoSnapshots => ("No snapshots.", "沒有快照。", "没有快照。"),
            Msg::SnapshotName => (
                "Snapshot name (optional)",
                "快照名稱（選填）",
                "快照名称（可选）",
            ),
            Msg::TakeSnapshot => ("Take snapshot", "建立快照", "创建快照"),
            Msg::Restore => ("Restore", "還原", "还原"),
            Msg::Reset => ("Reset container", "重設容器", "重置容器"),
            Msg::ResetWarning => (
                "Reset re-creates the container from the course's image: everything outside the home directory (installed packages, files elsewhere, snapshots) is lost; the home directory is kept.",
                "重設會以課程映像重新建立容器：家目錄以外的一切（安裝的套件、其他位置的檔案、快照）都會遺失；家目錄會保留。",
                "重置会以课程镜像重新创建容器：主目录以外的一切（安装的软件包、其他位置的文件、快照）都会丢失；主目录会保留。",
            ),
            Msg::Teardown => ("Tear down the course", "結束課程", "结束课程"),
            Msg::TeardownStop => (
                "Stop every container (all data kept)",
                "停止所有容器（資料全部保留）",
                "停止所有容器（数据全部保留）",
            ),
            Msg::TeardownDelete => (
                "Delete every container (home directories kept)",
                "刪除所有容器（保留家目錄）",
                "删除所有容器（保留主目录）",
            ),
            Msg::MyCourses => ("My courses", "我的課程", "我的课程"),
            Msg::NoCourses => ("You have no courses.", "您沒有課程。", "您没有课程。"),
            Msg::Code => ("Code", "代碼", "代码"),
            Msg::CourseTitle => ("Title", "標題", "标题"),
            Msg::Provisioning => ("Provisioning", "正在建立", "正在创建"),
            Msg::Class => ("Class", "班級", "班级"),
            Msg::Provision => ("Provision containers", "建立容器", "创建容器"),
            Msg::Roster => ("Roster", "名單", "名单"),
            Msg::RosterFile => ("Roster file (CSV)", "名單檔案（CSV）", "名单文件（CSV）"),
            Msg::RosterText => ("Roster (CSV text)", "名單（CSV 文字）", "名单（CSV 文本）"),
            Msg::ImportRoster => ("Import roster", "匯入名單", "导入名单"),
            Msg::NewCourse => ("New course", "新增課程", "新建课程"),
            Msg::CreateCourse => ("Create course", "建立課程", "创建课程"),
            Msg::Image => ("Template image", "範本映像", "模板镜像"),
            Msg::Cpu => ("CPU cores per student", "每位學生的 CPU 核心", "每位学生的 CPU 核心"),
            Msg::MemoryMib => ("Memory per student (MiB)", "每位學生的記憶體（MiB）", "每位学生的内存（MiB）"),
            Msg::DiskGib => ("Disk per student (GiB)", "每位學生的磁碟（GiB）", "每位学生的磁盘（GiB）"),
            Msg::Actions => ("Actions", "操作", "操作"),
            Msg::Admin => ("Administration", "系統管理", "系统管理"),
            Msg::Nodes => ("Nodes", "節點", "节点"),
            Msg::Audit => ("Audit log", "稽核紀錄", "审计日志"),
            Msg::AuditAction => ("Action", "動作", "动作"),
            Msg::AuditActor => ("Who", "執行者", "执行者"),
            Msg::Filter => ("Filter", "篩選", "筛选"),
            Msg::When => ("When", "時間", "时间"),
            Msg::Downloads => ("Endpoints", "連線資訊下載", "连接信息下载"),
            Msg::Memory => ("Memory", "記憶體", "内存"),
            Msg::Gpus => ("GPUs", "GPU", "GPU"),
            Msg::NoGpus => ("No GPUs.", "沒有 GPU。", "没有 GPU。"),
            Msg::Containers => ("Containers", "容器", "容器"),
            Msg::Model => ("Model", "型號", "型号"),
            Msg::InUse => ("Containers / limit", "使用中容器／上限", "使用中容器／上限"),
            Msg::UsedBy => ("Used by", "使用者容器", "使用者容器"),
            Msg::GpuMemoryUsed => (
                "GPU memory used by their processes",
                "其行程使用的 GPU 記憶體",
                "其进程使用的 GPU 显存",
            ),
            Msg::Cordon => ("Cordon", "暫停排程", "暂停调度"),
            Msg::Uncordon => ("Restore", "恢復", "恢复"),
            Msg::Evacuate => ("Evacuate", "疏散", "疏散"),
            Msg::EvacuateWarning => (
                "Evacuating takes the node out of placement and stops its containers, or moves them, with their files and homes, to other nodes. Running work in them is interrupted. Restore puts the node back, starts what was stopped and moves back what was moved.",
                "疏散會讓節點停止接受排程，並停止其上的容器，或將它們連同檔案與家目錄移到其他節點。容器中正在執行的工作會中斷。「恢復」會讓節點重新接受排程、啟動被停止的容器，並將移走的容器移回。",
                "疏散会让节点停止接受调度，并停止其上的容器，或将它们连同文件与主目录移到其他节点。容器中正在运行的工作会中断。“恢复”会让节点重新接受调度、启动被停止的容器，并将移走的容器移回。",
            ),
            Msg::EvacuateHow => ("What happens to its containers", "其容器如何處理", "其容器如何处理"),
            Msg::EvacuateStop => (
                "Stop them where they are (homes and SSH ports stay on the node)",
                "在原節點停止（家目錄與 SSH 連接埠留在該節點）",
                "在原节点停止（主目录与 SSH 端口留在该节点）",
            ),
            Msg::EvacuateMove => (
                "Move them with their files and homes to other nodes, with a new SSH port there",
                "連同檔案與家目錄移到其他節點，並使用新的 SSH 連接埠",
                "连同文件与主目录移到其他节点，并使用新的 SSH 端口",
            ),
            Msg::Queue => ("Queue", "等待佇列", "等待队列"),
            Msg::QueueEmpty => ("Nothing is waiting.", "目前沒有等待中的容器。", "目前没有等待中的容器。"),
            Msg::Priority => ("Priority", "優先順序", "优先级"),
            Msg::WaitingSince => ("Asked for", "申請時間", "申请时间"),
            Msg::Reason => ("Why it waits", "等待原因", "等待原因"),
            Msg::UsersAndRoles => ("Users and roles", "使用者與角色", "用户与角色"),
            Msg::Role => ("Role", "角色", "角色"),
            Msg::ChangeRole => ("Change role", "變更角色", "更改角色"),
            Msg::RoleStudent => ("Student", "學生", "学生"),
            Msg::RoleInstructor => ("Instructor", "教師", "教师"),
            Msg::RoleAdmin => ("Admin", "管理員", "管理员"),
            Msg::Disabled => ("disabled", "已停用", "已停用"),
            Msg::CreateContainer => ("Create Container", "建立容器", "创建容器"),
            Msg::YourAllowance => ("Your allowance per container:", "您每個容器的配額：", "您每个容器的配额："),
            Msg::AtMostContainers => ("containers at most:", "容器數量上限：", "容器数量上限："),
            Msg::AllowanceUsed => (
                "You own as many containers as a student may; delete one to create another",
                "您擁有的容器已達學生上限；刪除一個才能再建立",
                "您拥有的容器已达学生上限；删除一个才能再创建",
            ),
            Msg::NoImages => (
                "The image catalog is empty, so there is nothing to create a container from yet.",
                "映像目錄是空的，目前還無法建立容器。",
                "镜像目录是空的，目前还无法创建容器。",
            ),
            Msg::CatalogImage => ("Image", "映像", "镜像"),
            Msg::CpuCores => ("CPU cores", "CPU 核心", "CPU 核心"),
            Msg::GpuCount => ("GPUs", "GPU 數量", "GPU 数量"),
            Msg::GpuModel => ("GPU model", "GPU 型號", "GPU 型号"),
            Msg::AnyGpuModel => ("Any model", "任何型號", "任何型号"),
            Msg::MemoryMibOwn => ("Memory (MiB)", "記憶體（MiB）", "内存（MiB）"),
            Msg::DiskGibOwn => ("Disk (GiB)", "磁碟（GiB）", "磁盘（GiB）"),
            Msg::AtMost => ("at most", "上限", "上限"),
            Msg::CourseLimits => ("Limits per student", "每位學生的限制", "每位学生的限制"),
            Msg::GpusPerStudent => ("GPUs per student", "每位學生的 GPU", "每位学生的 GPU"),
            Msg::IdleStop => ("Stopped after no GPU use for", "GPU 閒置多久後停止", "GPU 闲置多久后停止"),
            Msg::LongestRun => ("Stopped after running for", "執行多久後停止", "运行多久后停止"),
            Msg::HomeMib => (
                "Home volume per student (MiB; taken when a container is next made)",
                "每位學生的家目錄磁碟區（MiB；下次建立容器時生效）",
                "每位学生的主目录卷（MiB；下次创建容器时生效）",
            ),
            Msg::ControllerDefault => ("the controller's default", "控制器預設值", "控制器默认值"),
            Msg::SaveLimits => ("Save limits", "儲存限制", "保存限制"),
            Msg::LimitsApplyToNew => (
                "New cores and memory reach the containers already made at once, where their node has room (the rest are listed below with why). A container's root disk keeps the size it was made with; containers made from now on take all three.",
                "新的 CPU 核心與記憶體限制會立即套用到已建立的容器（其節點有足夠空間時；其餘容器列於下方並說明原因）。已建立容器的根磁碟保留建立時的大小；此後建立的容器會套用全部三項限制。",
                "新的 CPU 核心与内存限制会立即应用到已创建的容器（其节点有足够空间时；其余容器列于下方并说明原因）。已创建容器的根磁盘保留创建时的大小；此后创建的容器会应用全部三项限制。",
            ),
            Msg::LimitsKept => (
                "These containers keep other limits than the course's until they are deleted and provisioned again:",
                "以下容器保留與課程不同的限制，直到刪除並重新建立：",
                "以下容器保留与课程不同的限制，直到删除并重新创建：",
            ),
            Msg::WhyKept => ("Why", "原因", "原因"),
            Msg::ApplyingLimits => ("Applying the new limits", "正在套用新的限制", "正在应用新的限制"),
            Msg::Container => ("Container", "容器", "容器"),
            Msg::NetworkPolicy => ("Network policy", "網路政策", "网络策略"),
            Msg::NetworkApplies => (
                "A change is applied at once to the course's containers, without a restart.",
                "變更會立即套用到課程的容器，無需重新啟動。",
                "更改会立即应用到课程的容器，无需重启。",
            ),
            Msg::Egress => ("Outgoing connections", "對外連線", "对外连接"),
            Msg::EgressOpen => ("Open (anywhere)", "開放（任何地方）", "开放（任何地方）"),
            Msg::EgressNone => ("None (nowhere, e.g. an exam)", "禁止（不能連往任何地方，例如考試）", "禁止（不能连往任何地方，例如考试）"),
            Msg::EgressAllow => ("Only the allowed destinations", "僅限允許的目的地", "仅限允许的目的地"),
            Msg::AllowList => (
                "Allowed destinations (one CIDR or CIDR:PORT a line, e.g. 10.0.0.0/8:3128)",
                "允許的目的地（每行一個 CIDR 或 CIDR:連接埠，例如 10.0.0.0/8:3128）",
                "允许的目的地（每行一个 CIDR 或 CIDR:端口，例如 10.0.0.0/8:3128）",
            ),
            Msg::SshFrom => ("SSH reachable from", "可連線 SSH 的來源", "可连接 SSH 的来源"),
            Msg::SshFromList => (
                "SSH reachable from (one IPv4 CIDR a line; empty: anywhere)",
                "可連線 SSH 的來源（每行一個 IPv4 CIDR；留空表示任何地方）",
                "可连接 SSH 的来源（每行一个 IPv4 CIDR；留空表示任何地方）",
            ),
            Msg::Anywhere => ("anywhere", "任何地方", "任何地方"),
            Msg::SaveNetwork => ("Save network policy", "儲存網路政策", "保存网络策略"),
            Msg::RosterRefused => (
                "Nothing was imported; fix these rows and import again.",
                "未匯入任何資料；請修正以下各列後重新匯入。",
                "未导入任何数据；请修正以下各行后重新导入。",
            ),
            Msg::RosterRow => ("Row", "列", "行"),
            Msg::RosterPasted => ("As pasted", "貼上的內容", "粘贴的内容"),
            Msg::RosterWrong => ("What is wrong", "問題", "问题"),
            Msg::RosterCreated => ("Accounts created", "已建立的帳號", "已创建的账号"),
            Msg::RosterEnrolled => ("Students enrolled", "已加入課程的學生", "已加入课程的学生"),
            Msg::RosterAlreadyEnrolled => ("Already enrolled", "先前已加入", "此前已加入"),
            Msg::RosterKeysIgnored => (
                "Existing accounts whose roster key was ignored (they keep their own keys)",
                "已有帳號、名單中的金鑰被忽略者（保留其原有金鑰）",
                "已有账号、名单中的密钥被忽略者（保留其原有密钥）",
            ),
            Msg::RosterNotInRoster => (
                "Enrolled but not in this roster (not removed)",
                "已加入但不在此名單中（未移除）",
                "已加入但不在此名单中（未移除）",
            ),
            Msg::PasswordsShownOnce => (
                "Generated passwords, shown this once: copy them now and hand each to its student. They are not shown again, on this page or in the endpoint downloads.",
                "產生的密碼只顯示這一次：請立即複製並交給各個學生。之後不會在此頁面或連線資訊下載中再次顯示。",
                "生成的密码只显示这一次：请立即复制并交给各个学生。之后不会在此页面或连接信息下载中再次显示。",
            ),
            Msg::TearingDown => ("Tearing down the course", "正在結束課程", "正在结束课程"),
            Msg::TeardownConfirm => (
                "Yes, tear down every student's container now (running work in them stops)",
                "是的，立即結束所有學生的容器（其中執行中的工作會停止）",
                "是的，立即结束所有学生的容器（其中运行中的工作会停止）",
            ),
            Msg::TeardownUnconfirmed => (
                "Nothing was torn down: tick the box to confirm.",
                "尚未結束任何容器：請勾選方塊以確認。",
                "尚未结束任何容器：请勾选方框以确认。",
            ),
            Msg::RemoveStudent => ("Remove from the course", "從課程移除", "从课程移除"),
            Msg::RemoveStudentWarning => (
                "Removing unenrols the student and deletes their container; their home directory is kept unless you delete it too.",
                "移除會讓學生退出課程並刪除其容器；除非一併刪除，否則家目錄會保留。",
                "移除会让学生退出课程并删除其容器；除非一并删除，否则主目录会保留。",
            ),
            Msg::DeleteHome => (
                "Delete the home directory too (cannot be undone)",
                "一併刪除家目錄（無法復原）",
                "一并删除主目录（无法恢复）",
            ),
            Msg::Staff => ("Staff", "教學團隊", "教学团队"),
            Msg::Datasets => ("Datasets", "資料集", "数据集"),
            Msg::DataUsed => ("Data used", "已用資料空間", "已用数据空间"),
            Msg::Size => ("Size", "大小", "大小"),
            Msg::Version => ("Version", "版本", "版本"),
            Msg::PushedBy => ("Pushed by", "上傳者", "上传者"),
            Msg::DatasetName => ("Dataset name (mounted at /data/NAME)", "資料集名稱（掛載於 /data/名稱）", "数据集名称（挂载于 /data/名称）"),
            Msg::DatasetFile => ("Tar file", "Tar 檔案", "Tar 文件"),
            Msg::Upload => ("Upload", "上傳", "上传"),
            Msg::Uploading => ("Uploading…", "上傳中…", "上传中…"),
            Msg::Uploaded => ("Uploaded; reaching the nodes.", "已上傳，正在送往各節點。", "已上传，正在送往各节点。"),
            Msg::UploadNeedsScript => ("Uploading here needs JavaScript; or use", "此處上傳需要 JavaScript；或使用", "此处上传需要 JavaScript；或使用"),
            Msg::MyArchives => ("My archived work", "我的封存作業", "我的归档作业"),
            Msg::ArchivesNote => (
                "Your home directory as it was when the course was archived, as a .tar.gz file.",
                "課程封存時您的家目錄，為 .tar.gz 檔案。",
                "课程归档时您的主目录，为 .tar.gz 文件。",
            ),
            Msg::KeptUntil => ("Kept until", "保留至", "保留至"),
            Msg::ArchiveHomes => (
                "Archive every student's home first (each student can download it)",
                "先封存每位學生的家目錄（學生可下載）",
                "先归档每位学生的主目录（学生可下载）",
            ),
            Msg::HomeSnapshots => ("Home snapshots", "家目錄快照", "主目录快照"),
            Msg::NoHomeSnapshots => (
                "No snapshots of the home directory yet.",
                "家目錄尚無快照。",
                "主目录尚无快照。",
            ),
            Msg::RestoreHomeWarning => (
                "Restore puts the whole home directory back as it was in the snapshot: later changes there are lost. A running container is stopped for it and started again.",
                "還原會將整個家目錄恢復為快照時的內容：之後的變更將遺失。執行中的容器會先停止，完成後再啟動。",
                "还原会将整个主目录恢复为快照时的内容：之后的更改将丢失。运行中的容器会先停止，完成后再启动。",
            ),
            Msg::GpuOnDemand => ("GPU on demand", "隨需 GPU", "按需 GPU"),
            Msg::AttachGpu => ("Attach a GPU", "掛載 GPU", "挂载 GPU"),
            Msg::GiveGpuBack => ("Give the GPU back", "歸還 GPU", "归还 GPU"),
            Msg::LeaveGpuQueue => ("Leave the queue", "離開佇列", "离开队列"),
            Msg::LeaseHours => ("Hours", "小時", "小时"),
            Msg::PlaceInQueue => ("Place in the queue", "佇列中的位置", "队列中的位置"),
            Msg::GpuLeasedUntil => ("GPU leased until", "GPU 租用至", "GPU 租用至"),
            Msg::WarnBefore => ("Warning before a reclaim", "回收前的警告", "回收前的警告"),
            Msg::ReclaimIdleStop => (
                "This container has not been used for a while and will be stopped at",
                "此容器已閒置一段時間，將於此時停止：",
                "此容器已闲置一段时间，将于此时停止：",
            ),
            Msg::ReclaimIdleDetach => (
                "This container's GPU has not been used for a while and will be detached at",
                "此容器的 GPU 已閒置一段時間，將於此時卸離：",
                "此容器的 GPU 已闲置一段时间，将于此时卸离：",
            ),
            Msg::ReclaimMaxRuntime => (
                "This container reaches its course's longest run and will be stopped at",
                "此容器已達課程的最長執行時間，將於此時停止：",
                "此容器已达课程的最长运行时间，将于此时停止：",
            ),
            Msg::ReclaimLeaseEnd => (
                "This container's GPU lease ends and its GPU will be detached at",
                "此容器的 GPU 租用即將結束，GPU 將於此時卸離：",
                "此容器的 GPU 租用即将结束，GPU 将于此时卸离：",
            ),
            Msg::ReclaimBudget => (
                "Your GPU budget runs out: this container's GPU will be detached at",
                "您的 GPU 額度即將用完，此容器的 GPU 將於此時卸離：",
                "您的 GPU 额度即将用完，此容器的 GPU 将于此时卸离：",
            ),
            Msg::BudgetCannotWait => (
                "A GPU budget cannot be postponed; the course's instructor can grant more hours",
                "GPU 額度無法延後；課程的講師可以加給時數",
                "GPU 额度无法推迟；课程的讲师可以增加时数",
            ),
            Msg::KeepWorking => ("Keep working", "繼續使用", "继续使用"),
            Msg::KeptWorking => (
                "Keep working was used for this warning; using the container keeps it",
                "此警告已使用過「繼續使用」；實際使用容器即可保留",
                "此警告已使用过“继续使用”；实际使用容器即可保留",
            ),
            Msg::AttachGpuAgain => ("Attach a GPU again", "重新掛載 GPU", "重新挂载 GPU"),
            Msg::RestorePath => ("Restore this path", "還原此路徑", "还原此路径"),
            Msg::RestorePathHint => (
                "a path in the home, like notes/week3.md",
                "家目錄中的路徑，例如 notes/week3.md",
                "主目录中的路径，例如 notes/week3.md",
            ),
            Msg::RestorePathNote => (
                "Or copy one file or folder out of a snapshot into ~/restored/<snapshot>/, leaving the rest of the home as it is; the container keeps running.",
                "或從快照中將單一檔案或資料夾複製到 ~/restored/<快照>/，家目錄其餘部分不變；容器持續執行。",
                "或从快照中将单个文件或文件夹复制到 ~/restored/<快照>/，主目录其余部分不变；容器保持运行。",
            ),
            Msg::Jobs => ("Jobs", "工作", "作业"),
            Msg::SubmitJob => ("Submit the job", "提交工作", "提交作业"),
            Msg::JobContainer => ("Container", "容器", "容器"),
            Msg::JobCommand => ("Command", "指令", "命令"),
            Msg::JobCommandHint => (
                "a shell line, like: python train.py --epochs 20",
                "一行 shell 指令，例如：python train.py --epochs 20",
                "一行 shell 命令，例如：python train.py --epochs 20",
            ),
            Msg::JobGpus => ("GPUs", "GPU 數量", "GPU 数量"),
            Msg::JobHours => ("Time limit (hours)", "時間上限（小時）", "时间上限（小时）"),
            Msg::JobWorkdir => ("Directory in the home", "家目錄中的資料夾", "主目录中的文件夹"),
            Msg::JobState => ("State", "狀態", "状态"),
            Msg::JobPlace => ("Place and why", "排序與原因", "排序与原因"),
            Msg::JobExit => ("Exit code", "結束代碼", "退出代码"),
            Msg::JobLog => ("Output", "輸出", "输出"),
            Msg::CancelJob => ("Cancel the job", "取消工作", "取消作业"),
            Msg::NoJobs => ("No jobs yet.", "尚無工作。", "尚无作业。"),
            Msg::JobsNote => (
                "A job runs a command in your container as you, once its turn comes; with GPUs, it waits for one on its node (fewest GPU hours first) and gives it back when it ends.",
                "工作會在輪到時，以你的身分在你的容器中執行指令；需要 GPU 時，會等待節點上的 GPU（GPU 時數最少者優先），結束後歸還。",
                "作业会在轮到时，以你的身份在你的容器中执行命令；需要 GPU 时，会等待节点上的 GPU（GPU 时数最少者优先），结束后归还。",
            ),
            Msg::JobReason => ("Reason", "原因", "原因"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_picks_the_script_by_region_and_q() {
        assert_eq!(
            Lang::from_accept_language("zh-TW,zh;q=0.9,en;q=0.8"),
            Lang::ZhHant
        );
        assert_eq!(Lang::from_accept_language("zh-Hant-HK"), Lang::ZhHant);
        assert_eq!(Lang::from_accept_language("zh-CN,zh;q=0.9"), Lang::ZhHans);
        assert_eq!(Lang::from_accept_language("zh"), Lang::ZhHans);
        assert_eq!(
            Lang::from_accept_language("fr-FR,zh-TW;q=0.5"),
            Lang::ZhHant
        );
        assert_eq!(
            Lang::from_accept_language("en;q=0.2,zh-CN;q=0.8"),
            Lang::ZhHans
        );
        assert_eq!(Lang::from_accept_language("zh-TW;q=0,en"), Lang::En);
        assert_eq!(Lang::from_accept_language("de, fr"), Lang::En);
        assert_eq!(Lang::from_accept_language(""), Lang::En);
    }

    /// The Chinese texts of every message are Chinese. Read from this file's catalog, so a
    /// message added with English (or nothing) in a Chinese place fails here.
    #[test]
    fn every_message_is_translated() {
        let source = include_str!("i18n.rs");
        let start = source.find("fn texts(self)").expect("the catalog");
        let end = source[start..].find("#[cfg(test)]").expect("its end") + start;
        let arms: Vec<&str> = source[start..end].split("Msg::").skip(1).collect();
        assert!(arms.len() > 100, "{} messages read", arms.len());
        for arm in arms {
            let name = arm.split_whitespace().next().unwrap_or_default();
            let texts = string_literals(arm);
            assert_eq!(texts.len(), 3, "Msg::{name}: {texts:?}");
            assert!(!texts[0].is_empty(), "Msg::{name} has no English");
            for text in &texts[1..] {
                assert!(
                    super::super::words::translated(text),
                    "Msg::{name}: {text:?} is not translated"
                );
            }
        }
    }

    /// The string literals of a piece of Rust source, escapes left as written.
    fn string_literals(source: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut chars = source.chars();
        while let Some(c) = chars.next() {
            if c != '"' {
                continue;
            }
            let mut text = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => text.extend(chars.next()),
                    '"' => break,
                    c => text.push(c),
                }
            }
            found.push(text);
        }
        found
    }
}
