//! `seglog._native.GroupMember`: seglog-client's consumer group member
//! (Kafka's classic protocol through a broker's coordinator). Every round
//! trip, and a rejoin that waits for the rest of the group, runs with the
//! GIL released; the heartbeat thread is Rust's and never takes the GIL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use seglog_client::{ClientConfig, Cluster, MemberConfig};

use crate::errors::PyResult;

/// What `poll_assignment` answers Python: (generation, partitions, changed).
type PolledAssignment = (i32, Vec<(String, i32)>, bool);

#[pyclass(frozen, module = "seglog._native", name = "GroupMember")]
pub struct GroupMember {
    member: seglog_client::GroupMember,
    owner: super::Owner,
}

impl GroupMember {
    fn member(&self) -> PyResult<&seglog_client::GroupMember> {
        self.owner.check("GroupMember", "; make a new GroupMember (or Consumer) in the child")?;
        Ok(&self.member)
    }
}

#[pymethods]
impl GroupMember {
    #[new]
    #[pyo3(signature = (
        bootstrap_servers, group_id, topics, instance_id = None, session_timeout_ms = 45000,
        rebalance_timeout_ms = 300000, heartbeat_interval_ms = 3000, assignors = None,
        client_id = "seglog", timeout_ms = 30000
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        bootstrap_servers: &str,
        group_id: &str,
        topics: Vec<String>,
        instance_id: Option<String>,
        session_timeout_ms: i32,
        rebalance_timeout_ms: i32,
        heartbeat_interval_ms: i32,
        assignors: Option<Vec<String>>,
        client_id: &str,
        timeout_ms: u64,
    ) -> PyResult<Self> {
        let timeout = Duration::from_millis(timeout_ms.max(1));
        let client = ClientConfig {
            client_id: client_id.to_string(),
            connect_timeout: timeout,
            request_timeout: timeout,
            ..ClientConfig::default()
        };
        let mut config = MemberConfig {
            group_id: group_id.to_string(),
            topics,
            instance_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval_ms,
            ..MemberConfig::default()
        };
        if let Some(a) = assignors {
            config.assignors = a;
        }
        let member = py.detach(|| {
            let cluster = Arc::new(Cluster::connect(bootstrap_servers, client)?);
            seglog_client::GroupMember::new(cluster, config)
        })?;
        Ok(GroupMember { member, owner: super::Owner::here() })
    }

    #[getter]
    fn group_id(&self) -> String {
        self.member.config().group_id.clone()
    }
    /// The member id the coordinator gave ("" before the first join).
    #[getter]
    fn member_id(&self) -> String {
        self.member.member_id()
    }
    /// The generation joined last (-1 before the first join).
    #[getter]
    fn generation(&self) -> i32 {
        self.member.generation()
    }
    /// The assignor the group chose (None before the first join).
    #[getter]
    fn protocol(&self) -> Option<String> {
        self.member.protocol()
    }
    #[getter]
    fn is_leader(&self) -> bool {
        self.member.is_leader()
    }
    /// Whether the next `poll_assignment` rejoins (the group is rebalancing).
    #[getter]
    fn needs_rejoin(&self) -> bool {
        self.member.needs_rejoin()
    }

    /// (generation, sorted [(topic, partition)], changed since the last
    /// call); rejoins first when the group rebalances (or on the first call),
    /// waiting for the rest of the group.
    fn poll_assignment(&self, py: Python<'_>) -> PyResult<PolledAssignment> {
        let member = self.member()?;
        let a = py.detach(|| member.poll_assignment())?;
        Ok((a.generation, a.partitions, a.changed))
    }

    /// Changes the subscription; the next `poll_assignment` rejoins with it.
    fn subscribe(&self, topics: Vec<String>) -> PyResult<()> {
        self.member()?.subscribe(&topics);
        Ok(())
    }

    /// Commits [(topic, partition, offset, metadata)] with the member's
    /// generation and id; durable when this returns.
    fn commit(&self, py: Python<'_>, offsets: Vec<(String, i32, i64, String)>) -> PyResult<()> {
        let member = self.member()?;
        Ok(py.detach(|| member.commit(&offsets))?)
    }

    /// {(topic, partition): (offset, metadata)} of the group's committed
    /// offsets: of `partitions`, or all of the group's for None.
    #[pyo3(signature = (partitions = None))]
    fn committed(
        &self,
        py: Python<'_>,
        partitions: Option<Vec<(String, i32)>>,
    ) -> PyResult<HashMap<(String, i32), (i64, String)>> {
        let member = self.member()?;
        let got = py.detach(|| member.committed(partitions.as_deref()))?;
        Ok(got.into_iter().map(|c| ((c.topic, c.partition), (c.offset, c.metadata))).collect())
    }

    /// LeaveGroup (the group rebalances at once) and stop heart-beating.
    fn leave(&self, py: Python<'_>) -> PyResult<()> {
        let member = self.member()?;
        Ok(py.detach(|| member.leave())?)
    }

    /// Stop heart-beating without leaving (the coordinator drops the member
    /// after its session timeout; a static member may come back before).
    fn close(&self, py: Python<'_>) {
        if self.owner.is_here() {
            py.detach(|| self.member.close());
        }
    }
}
