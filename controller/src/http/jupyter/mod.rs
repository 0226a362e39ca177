//! JupyterLab in the browser behind the portal's sign-in (who may open a container's notebook is
//! `crate::instances::notebook`'s): the portal's way in (`entry`), the notebook's own origin (`origin`), the relay of
//! HTTP and websockets through the node's agent (`proxy`), and the notebook use idle reclaim
//! counts (`activity`).

pub mod activity;
pub mod entry;
pub mod origin;
pub mod proxy;
