//! The portal's words for what the system reports: instance, node and operation states, audit
//! actions and object kinds, and the queue's reasons. The API keeps its English snake_case names
//! (scripts read them); a page shows them in the reader's language. English pages keep the API's
//! own state words, which users already know from `cohort list` and `lxc list`.

use cohort_proto::api::instances::ObservedState;
use cohort_proto::api::nodes::NodeState;
use cohort_proto::api::operations::OperationStatus;

use super::i18n::Lang;
use crate::placement::queue_reason::QUEUED;

/// (English, Traditional Chinese, Simplified Chinese).
type Texts = (&'static str, &'static str, &'static str);

fn pick(lang: Lang, (en, hant, hans): Texts) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::ZhHant => hant,
        Lang::ZhHans => hans,
    }
}

fn observed_texts(state: ObservedState) -> Texts {
    match state {
        ObservedState::Queued => ("queued", "排隊等候中", "排队等候中"),
        ObservedState::Pending => ("pending", "建立中", "创建中"),
        ObservedState::Running => ("running", "執行中", "运行中"),
        ObservedState::Stopped => ("stopped", "已停止", "已停止"),
        ObservedState::Unknown => ("unknown", "狀態不明", "状态未知"),
        ObservedState::Missing => ("missing", "已遺失", "已丢失"),
        ObservedState::Error => ("error", "錯誤", "错误"),
    }
}

/// A container's observed state.
pub fn observed(lang: Lang, state: ObservedState) -> &'static str {
    pick(lang, observed_texts(state))
}

/// A container's state as the API names it (`Student::state`); an unknown name is shown as is.
pub fn observed_name(lang: Lang, name: &str) -> String {
    name.parse::<ObservedState>()
        .map(|s| observed(lang, s).to_string())
        .unwrap_or_else(|_| name.to_string())
}

fn node_texts(state: NodeState) -> Texts {
    match state {
        NodeState::Online => ("online", "上線", "在线"),
        NodeState::Offline => ("offline", "離線", "离线"),
        NodeState::Cordoned => ("cordoned", "暫停排程", "暂停调度"),
        NodeState::Evacuating => ("evacuating", "疏散中", "疏散中"),
    }
}

pub fn node(lang: Lang, state: NodeState) -> &'static str {
    pick(lang, node_texts(state))
}

fn status_texts(status: OperationStatus) -> Texts {
    match status {
        OperationStatus::Pending => ("pending", "等待中", "等待中"),
        OperationStatus::Running => ("running", "進行中", "进行中"),
        OperationStatus::Success => ("success", "成功", "成功"),
        OperationStatus::Failure => ("failure", "失敗", "失败"),
        OperationStatus::Cancelled => ("cancelled", "已取消", "已取消"),
    }
}

pub fn status(lang: Lang, status: OperationStatus) -> &'static str {
    pick(lang, status_texts(status))
}

/// Words the progress script shows, beyond the operation statuses: JSON for a `data-` attribute.
pub fn progress_words(lang: Lang) -> String {
    let mut words = serde_json::Map::new();
    for s in OperationStatus::ALL {
        words.insert(s.as_str().into(), status(lang, *s).into());
    }
    for (key, texts) in PROGRESS {
        words.insert((*key).into(), pick(lang, *texts).into());
    }
    serde_json::Value::Object(words).to_string()
}

/// What a provisioned student's row says.
pub fn ready(lang: Lang) -> &'static str {
    progress_word(lang, "ready")
}

/// What a student's row says once a teardown deleted its container.
pub fn deleted(lang: Lang) -> &'static str {
    progress_word(lang, "deleted")
}

fn progress_word(lang: Lang, key: &str) -> &'static str {
    PROGRESS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("", |(_, texts)| pick(lang, *texts))
}

/// The progress section's own words, by the keys portal.js uses.
const PROGRESS: &[(&str, Texts)] = &[
    ("ready", ("ready", "就緒", "就绪")),
    ("queued", ("queued", "排隊等候中", "排队等候中")),
    ("failed", ("failed", "失敗", "失败")),
    ("deleted", ("deleted", "已刪除", "已删除")),
    (
        "waiting",
        (
            "waiting for room on a node; the rest start when it frees",
            "等待節點空出資源；其餘容器會在資源空出時啟動",
            "等待节点空出资源；其余容器会在资源空出时启动",
        ),
    ),
];

/// An audit action, by the name the log keeps; an unknown name is shown as is.
pub fn audit_action(lang: Lang, name: &str) -> String {
    audit_action_texts(name)
        .map(|t| pick(lang, t).to_string())
        .unwrap_or_else(|| name.to_string())
}

/// Every audit action's words (its test checks that each action the log can hold has them).
fn audit_action_texts(name: &str) -> Option<Texts> {
    Some(match name {
        "apply_network_policy" => ("apply network policy", "套用網路政策", "应用网络策略"),
        "apply_ssh_keys" => ("apply SSH keys", "套用 SSH 金鑰", "应用 SSH 密钥"),
        "revoke_login" => ("revoke login", "撤銷登入", "撤销登录"),
        "add_ssh_key" => ("add SSH key", "新增 SSH 金鑰", "添加 SSH 密钥"),
        "adopt_orphan" => ("adopt orphan container", "接管孤立容器", "接管孤立容器"),
        "change_password" => ("change password", "變更密碼", "修改密码"),
        "cordon" => ("cordon", "暫停排程", "暂停调度"),
        "create" => ("create", "建立", "创建"),
        "create_join_token" => ("create join token", "建立加入權杖", "创建加入令牌"),
        "create_user" => ("create user", "建立使用者", "创建用户"),
        "delete" => ("delete", "刪除", "删除"),
        "delete_orphan" => ("delete orphan container", "刪除孤立容器", "删除孤立容器"),
        "delete_snapshot" => ("delete snapshot", "刪除快照", "删除快照"),
        "delete_ssh_key" => ("delete SSH key", "刪除 SSH 金鑰", "删除 SSH 密钥"),
        "detach_gpus" => ("detach GPUs", "卸除 GPU", "卸载 GPU"),
        "disable" => ("disable", "停用", "停用"),
        "distribute" => ("distribute image", "分發映像", "分发镜像"),
        "drop_image" => ("drop image from node", "從節點移除映像", "从节点移除镜像"),
        "drift" => ("drift found", "發現設定偏移", "发现配置漂移"),
        "enable" => ("enable", "啟用", "启用"),
        "end" => ("end", "結束", "结束"),
        "enroll" => ("enroll", "加入", "加入"),
        "evacuate" => ("evacuate", "疏散", "疏散"),
        "evacuate_move" => ("evacuate (move)", "疏散（移動）", "疏散（迁移）"),
        "evacuate_stop" => ("evacuate (stop)", "疏散（停止）", "疏散（停止）"),
        "exec" => ("run a command", "執行指令", "执行命令"),
        "failed_sign_in" => ("failed sign-in", "登入失敗", "登录失败"),
        "import" => ("import", "匯入", "导入"),
        "import_image" => ("import image", "匯入映像", "导入镜像"),
        "import_roster" => ("import roster", "匯入名單", "导入名单"),
        "issue_token" => ("issue API token", "核發 API 權杖", "签发 API 令牌"),
        "move" => ("move", "移動", "迁移"),
        "moved" => ("moved", "已移動", "已迁移"),
        "node_certificate_confirmed" => (
            "node certificate confirmed",
            "節點憑證已確認",
            "节点证书已确认",
        ),
        "node_certificate_renewed" => (
            "node certificate renewed",
            "節點憑證已更新",
            "节点证书已更新",
        ),
        "provision" => ("provision", "建立容器", "创建容器"),
        "publish" => ("publish image", "發布映像", "发布镜像"),
        "published" => ("image published", "映像已發布", "镜像已发布"),
        "put_file" => ("upload file", "上傳檔案", "上传文件"),
        "reactivate" => ("reactivate", "重新啟用", "重新启用"),
        "reissue_password" => ("reissue password", "重新核發密碼", "重新签发密码"),
        "remove" => ("remove", "移除", "移除"),
        "remove_student" => ("remove student", "移除學生", "移除学生"),
        "push_data" => ("push dataset", "上傳資料集", "上传数据集"),
        "remove_data" => ("remove dataset", "移除資料集", "移除数据集"),
        "set_data_quota" => ("set data quota", "設定資料配額", "设置数据配额"),
        "sync_data" => ("sync datasets", "同步資料集", "同步数据集"),
        "add_staff" => ("add staff", "新增教學團隊成員", "添加教学团队成员"),
        "remove_staff" => ("remove staff", "移除教學團隊成員", "移除教学团队成员"),
        "copy_course" => ("copy course", "複製課程", "复制课程"),
        "archive" => ("archive homes", "封存家目錄", "归档主目录"),
        "archive_home" => ("archive home", "封存家目錄", "归档主目录"),
        "archive_expired" => ("archive expired", "封存已過期", "归档已过期"),
        "set_archive_days" => ("set archive days", "設定封存保留天數", "设置归档保留天数"),
        "restore_home" => ("restore home", "還原家目錄", "还原主目录"),
        "restore_home_path" => (
            "restore a path from a home snapshot",
            "從家目錄快照還原路徑",
            "从主目录快照还原路径",
        ),
        "set_home_snapshots" => ("set home snapshots", "設定家目錄快照", "设置主目录快照"),
        "rename_image" => ("rename image", "重新命名映像", "重命名镜像"),
        "rename_snapshot" => ("rename snapshot", "重新命名快照", "重命名快照"),
        "reset" => ("reset", "重設", "重置"),
        "restart" => ("restart", "重新啟動", "重启"),
        "restore" => ("restore", "恢復", "恢复"),
        "restore_snapshot" => ("restore snapshot", "還原快照", "还原快照"),
        "revoke_token" => ("revoke API token", "撤銷 API 權杖", "撤销 API 令牌"),
        "roster_key_ignored" => (
            "roster key ignored",
            "已忽略名單中的金鑰",
            "已忽略名单中的密钥",
        ),
        "set_home" => ("set home volume", "設定家目錄磁碟區", "设置主目录卷"),
        "set_jupyter" => ("set JupyterLab", "設定 JupyterLab", "设置 JupyterLab"),
        "set_limits" => ("set limits", "設定限制", "设置限制"),
        "set_network" => ("set network policy", "設定網路政策", "设置网络策略"),
        "set_password" => ("set password", "設定密碼", "设置密码"),
        "set_quota" => ("set quota", "設定配額", "设置配额"),
        "set_role" => ("set role", "設定角色", "设置角色"),
        "show_passwords" => ("show passwords", "顯示密碼", "显示密码"),
        "sign_in" => ("sign in", "登入", "登录"),
        "sign_out" => ("sign out", "登出", "退出登录"),
        "snapshot" => ("snapshot", "建立快照", "创建快照"),
        "start" => ("start", "啟動", "启动"),
        "stop" => ("stop", "停止", "停止"),
        "student_reset" => (
            "reset a student's container",
            "重設學生容器",
            "重置学生容器",
        ),
        "student_restart" => (
            "restart a student's container",
            "重新啟動學生容器",
            "重启学生容器",
        ),
        "student_start" => (
            "start a student's container",
            "啟動學生容器",
            "启动学生容器",
        ),
        "student_stop" => ("stop a student's container", "停止學生容器", "停止学生容器"),
        "teardown" => ("tear down", "結束課程", "结束课程"),
        "trust_certificate" => ("trust certificate", "信任憑證", "信任证书"),
        "trust_token" => ("create trust token", "建立信任權杖", "创建信任令牌"),
        "untrust_certificate" => ("remove trusted certificate", "移除信任憑證", "移除信任证书"),
        "update" => ("update", "更新", "更新"),
        "set_budget" => ("set GPU budget", "設定 GPU 預算", "设置 GPU 预算"),
        "set_gpu_mode" => ("set GPU mode", "設定 GPU 模式", "设置 GPU 模式"),
        "request_gpu" => ("request a GPU", "申請 GPU", "申请 GPU"),
        "release_gpu" => ("give a GPU back", "歸還 GPU", "归还 GPU"),
        "attach_gpus" => ("attach GPUs", "掛載 GPU", "挂载 GPU"),
        "grant_gpu_hours" => ("grant GPU hours", "核發 GPU 時數", "授予 GPU 时数"),
        "budget_warning" => ("GPU budget warning", "GPU 預算警告", "GPU 预算警告"),
        "reclaim_warning" => ("reclaim warning", "回收警告", "回收警告"),
        "keep_working" => ("keep working", "繼續使用", "继续使用"),
        "set_reclaim_warning" => ("set reclaim warning", "設定回收警告", "设置回收警告"),
        "submit_job" => ("submit a job", "提交工作", "提交作业"),
        "cancel_job" => ("cancel a job", "取消工作", "取消作业"),
        "set_job_priority" => ("set a job's priority", "設定工作優先順序", "设置作业优先级"),
        "set_job_limits" => ("set job limits", "設定工作上限", "设置作业上限"),
        _ => return None,
    })
}

/// An audit object kind, by the name the log keeps; an unknown name is shown as is.
pub fn audit_object(lang: Lang, name: &str) -> String {
    audit_object_texts(name)
        .map(|t| pick(lang, t).to_string())
        .unwrap_or_else(|| name.to_string())
}

fn audit_object_texts(name: &str) -> Option<Texts> {
    Some(match name {
        "course" => ("course", "課程", "课程"),
        "gpu" => ("GPU", "GPU", "GPU"),
        "image" => ("image", "映像", "镜像"),
        "instance" => ("container", "容器", "容器"),
        "lxd_certificate" => ("LXD certificate", "LXD 憑證", "LXD 证书"),
        "node" => ("node", "節點", "节点"),
        "source" => ("image source", "映像來源", "镜像来源"),
        "user" => ("user", "使用者", "用户"),
        _ => return None,
    })
}

/// Why a container waits, as placement words it (`placement::queue_reason`, with or without
/// its `queued:` prefix), in `lang`. English is placement's own text; a reason these patterns do
/// not know is shown as it is.
pub fn queue_reason(lang: Lang, reason: &str) -> String {
    if lang == Lang::En {
        return reason.to_string();
    }
    let bare = reason.strip_prefix(QUEUED).unwrap_or(reason).trim();
    translate_reason(lang, bare).unwrap_or_else(|| reason.to_string())
}

fn translate_reason(lang: Lang, reason: &str) -> Option<String> {
    let hant = lang == Lang::ZhHant;
    let zh = |t: &str, s: &str| if hant { t.to_string() } else { s.to_string() };
    if reason == "no node is enrolled" {
        return Some(zh("尚未加入任何節點", "尚未加入任何节点"));
    }
    if reason == "no node has a free SSH port" {
        return Some(zh(
            "沒有節點有空閒的 SSH 連接埠",
            "没有节点有空闲的 SSH 端口",
        ));
    }
    if let Some(rest) = reason.strip_prefix("no node is online (of ") {
        let n = rest.split(':').next()?;
        return Some(if hant {
            format!("沒有上線的節點（共 {n} 個：離線、暫停排程或疏散中）")
        } else {
            format!("没有在线的节点（共 {n} 个：离线、暂停调度或疏散中）")
        });
    }
    if let Some(rest) = reason.strip_prefix("no single node has room for all of it at once (") {
        let nums: Vec<&str> = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .collect();
        let [cpu, mem, disk, gpus] = nums.as_slice() else {
            return None;
        };
        return Some(if hant {
            format!("沒有單一節點能同時容納全部需求（{cpu} 個 CPU、{mem} MiB 記憶體、{disk} GiB 磁碟、{gpus} 個 GPU）")
        } else {
            format!("没有单个节点能同时容纳全部需求（{cpu} 个 CPU、{mem} MiB 内存、{disk} GiB 磁盘、{gpus} 个 GPU）")
        });
    }
    let rest = reason.strip_prefix("needs ")?;
    let (need, free) = rest.split_once("; ")?;
    let free = free
        .strip_prefix("most free on any node: ")
        .or_else(|| free.strip_prefix("largest free on any node: "))?;
    let free = free.split_whitespace().next()?;
    let amount = need.split_whitespace().next()?;
    let (what_t, what_s) = if need.ends_with(" GiB of disk") {
        (format!("{amount} GiB 磁碟"), format!("{amount} GiB 磁盘"))
    } else if need.ends_with(" MiB of memory") {
        (format!("{amount} MiB 記憶體"), format!("{amount} MiB 内存"))
    } else if need.ends_with(" CPU") {
        (format!("{amount} 個 CPU"), format!("{amount} 个 CPU"))
    } else if need.contains(" GPU") {
        let model = need
            .split_whitespace()
            .nth(1)
            .filter(|w| !w.starts_with("GPU"))
            .map(|m| format!(" {m}"))
            .unwrap_or_default();
        let (how_t, how_s) = if need.ends_with(" to itself") {
            ("（獨占）", "（独占）")
        } else if need.contains("shared within") {
            ("（依課程的共用設定）", "（按课程的共享设置）")
        } else {
            ("", "")
        };
        (
            format!("{amount} 個{model} GPU{how_t}"),
            format!("{amount} 个{model} GPU{how_s}"),
        )
    } else {
        return None;
    };
    let unit = if need.ends_with(" GiB of disk") {
        " GiB"
    } else if need.ends_with(" MiB of memory") {
        " MiB"
    } else {
        ""
    };
    Some(if hant {
        format!("需要 {what_t}；任一節點最多只有 {free}{unit} 空閒")
    } else {
        format!("需要 {what_s}；任一节点最多只有 {free}{unit} 空闲")
    })
}

/// A Chinese text must have Chinese in it; only these names stay as they are.
#[cfg(test)]
pub(super) fn translated(text: &str) -> bool {
    const NAMES: [&str; 2] = ["GPU", "JupyterLab"];
    text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)) || NAMES.contains(&text)
}

/// An audit action's and an audit object kind's words, for the test (`crate::audit`'s, beside
/// the log's own names) that finds every name the log can hold translated.
#[cfg(test)]
pub(crate) fn check_audit_words(action: Option<&str>, object: Option<&str>) {
    if let Some(name) = action {
        tests::check("audit action", name, audit_action_texts(name));
    }
    if let Some(name) = object {
        tests::check("audit object", name, audit_object_texts(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn check(what: &str, key: &str, texts: Option<Texts>) {
        let (en, hant, hans) = texts.unwrap_or_else(|| panic!("{what} {key:?} has no words"));
        assert!(!en.is_empty(), "{what} {key:?}: no English");
        assert!(
            translated(hant),
            "{what} {key:?}: {hant:?} is not Traditional Chinese"
        );
        assert!(
            translated(hans),
            "{what} {key:?}: {hans:?} is not Simplified Chinese"
        );
    }

    #[test]
    fn every_state_status_and_audit_word_is_translated() {
        for s in ObservedState::ALL {
            check("state", s.as_str(), Some(observed_texts(*s)));
            assert_eq!(
                observed(Lang::En, *s),
                s.as_str(),
                "English keeps the API's word"
            );
        }
        for s in NodeState::ALL {
            check("node state", s.as_str(), Some(node_texts(*s)));
            assert_eq!(node(Lang::En, *s), s.as_str());
        }
        for s in OperationStatus::ALL {
            check("status", s.as_str(), Some(status_texts(*s)));
            assert_eq!(status(Lang::En, *s), s.as_str());
        }
        for (key, texts) in PROGRESS {
            check("progress word", key, Some(*texts));
        }
    }

    #[test]
    fn queue_reasons_are_translated() {
        let cases = [
            (
                "needs 10 GiB of disk; largest free on any node: 3 GiB",
                "需要 10 GiB 磁碟；任一節點最多只有 3 GiB 空閒",
            ),
            (
                "needs 512 MiB of memory; most free on any node: 100 MiB",
                "需要 512 MiB 記憶體；任一節點最多只有 100 MiB 空閒",
            ),
            (
                "needs 2 CPU; most free on any node: 1",
                "需要 2 個 CPU；任一節點最多只有 1 空閒",
            ),
            (
                "needs 1 A100 GPU to itself; most free on any node: 0",
                "需要 1 個 A100 GPU（獨占）；任一節點最多只有 0 空閒",
            ),
            ("no node is enrolled", "尚未加入任何節點"),
            (
                "no node is online (of 2: offline, cordoned or evacuating)",
                "沒有上線的節點（共 2 個：離線、暫停排程或疏散中）",
            ),
        ];
        for (en, hant) in cases {
            assert_eq!(queue_reason(Lang::En, en), en);
            assert_eq!(queue_reason(Lang::ZhHant, en), hant);
            assert!(translated(&queue_reason(Lang::ZhHans, en)), "{en}");
        }
        assert_eq!(queue_reason(Lang::ZhHans, "something new"), "something new");
    }
}
