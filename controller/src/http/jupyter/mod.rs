//! JupyterLab in the browser behind the portal's sign-in (who may open a container's notebook is
//! `crate::instances::notebook`'s): the portal's way in (`entry`), the notebook's own origin (`origin`), and the relay of
//! HTTP and websockets through the node's agent (`proxy`). Relayed traffic is never counted as
//! use: an open tab polls by itself; idle reclaim asks JupyterLab instead (`crate::reclaim::activity`).
//! A pending reclaim warning is shown over JupyterLab's pages too (`banner`).

pub mod banner;
pub mod entry;
pub mod origin;
pub mod proxy;
