//! `seglog._native.RemoteClient`: seglog-client's cluster view, fetch, list
//! offsets and idempotent producer over a broker's network protocol. Every
//! network round trip runs with the GIL released.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use seglog_client::admin::{self, GroupOffsets};
use seglog_client::{
    fetch_columns, fetch_one, list_offset, Cluster, FetchOptions, FetchPartition, IdempotentProducer,
    ProducerConfig,
};
use seglog_core::record::Compression;

use crate::consumer::client_config;
use crate::errors::PyResult;
use crate::records::{extract_record, to_records, with_new_records, InRecord};
use crate::store::{columns_to_py, member_dict};

#[pyclass(frozen, module = "seglog._native", name = "RemoteClient")]
pub struct RemoteClient {
    cluster: Arc<Cluster>,
    /// Made on the first `produce` (an InitProducerId round trip).
    producer: Mutex<Option<Arc<IdempotentProducer>>>,
    owner: super::Owner,
}

impl RemoteClient {
    fn cluster(&self) -> PyResult<&Arc<Cluster>> {
        self.owner.check("RemoteClient", "; make a new RemoteClient in the child")?;
        Ok(&self.cluster)
    }
}

fn options(max_bytes: i32, max_wait_ms: i32) -> FetchOptions {
    FetchOptions { max_wait_ms, max_bytes, ..FetchOptions::default() }
}

#[pymethods]
impl RemoteClient {
    #[new]
    #[pyo3(signature = (bootstrap_servers, client_id = "seglog", timeout_ms = 30000))]
    fn new(py: Python<'_>, bootstrap_servers: &str, client_id: &str, timeout_ms: u64) -> PyResult<Self> {
        let config = client_config(client_id, timeout_ms);
        let cluster = py.detach(|| Cluster::connect(bootstrap_servers, config))?;
        Ok(RemoteClient {
            cluster: Arc::new(cluster),
            producer: Mutex::new(None),
            owner: super::Owner::here(),
        })
    }

    /// The cluster as a Metadata request describes it: cluster_id,
    /// controller_id, brokers (list of dicts) and topics (name -> dict with
    /// error_code, is_internal and partitions). Every topic for None; asking
    /// does not create topics.
    #[pyo3(signature = (topics = None))]
    fn metadata<'py>(&self, py: Python<'py>, topics: Option<Vec<String>>) -> PyResult<Bound<'py, PyDict>> {
        let cluster = self.cluster()?;
        let m = py.detach(|| cluster.refresh(topics.as_deref(), false))?;
        let out = PyDict::new(py);
        out.set_item("cluster_id", m.cluster_id)?;
        out.set_item("controller_id", m.controller_id)?;
        let brokers = PyList::empty(py);
        for b in m.brokers.values() {
            let d = PyDict::new(py);
            d.set_item("node_id", b.node_id)?;
            d.set_item("host", &b.host)?;
            d.set_item("port", b.port)?;
            d.set_item("rack", &b.rack)?;
            brokers.append(d)?;
        }
        out.set_item("brokers", brokers)?;
        let ts = PyDict::new(py);
        for (name, t) in &m.topics {
            let d = PyDict::new(py);
            d.set_item("error_code", t.error_code)?;
            d.set_item("is_internal", t.is_internal)?;
            let parts = PyList::empty(py);
            for p in &t.partitions {
                let pd = PyDict::new(py);
                pd.set_item("partition", p.partition)?;
                pd.set_item("leader", p.leader)?;
                pd.set_item("leader_epoch", p.leader_epoch)?;
                pd.set_item("replicas", &p.replicas)?;
                pd.set_item("isr", &p.isr)?;
                pd.set_item("error_code", p.error_code)?;
                parts.append(pd)?;
            }
            d.set_item("partitions", parts)?;
            ts.set_item(name, d)?;
        }
        out.set_item("topics", ts)?;
        Ok(out)
    }

    /// The offset for `timestamp`: -2 the log start, -1 the high watermark,
    /// else the first offset whose timestamp is at or after it (None if none is).
    fn list_offsets(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> PyResult<Option<i64>> {
        let cluster = self.cluster()?;
        Ok(py.detach(|| list_offset(cluster, topic, partition, timestamp))?.map(|(offset, _)| offset))
    }

    /// Records at or after `offset` from one Fetch (whole batches of at most
    /// about `max_bytes`; the broker waits up to `max_wait_ms` for data).
    #[pyo3(signature = (topic, partition, offset, max_bytes = 1048576, max_wait_ms = 500, max_records = None))]
    #[allow(clippy::too_many_arguments)]
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyString>,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
        max_records: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let name = topic.to_str()?;
        let cluster = self.cluster()?;
        let wanted = FetchPartition { max_bytes, ..FetchPartition::new(name, partition, offset) };
        let batches =
            py.detach(|| fetch_one(cluster, &wanted, &options(max_bytes, max_wait_ms))?.batches())?;
        Ok(to_records(py, topic, partition, &batches, offset, max_records.unwrap_or(usize::MAX))?)
    }

    /// Records at or after `offset` as Arrow column buffers (the dict
    /// `Store.read_columns` gives), at most `max_records`, fetching until then
    /// or the high watermark; and the offset to read next (None if nothing was read).
    #[pyo3(signature = (topic, partition, offset, max_records, max_bytes = 1048576, max_wait_ms = 500))]
    #[allow(clippy::too_many_arguments)]
    fn fetch_arrow<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        partition: i32,
        offset: i64,
        max_records: usize,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> PyResult<(Bound<'py, PyDict>, Option<i64>)> {
        let cluster = self.cluster()?;
        let wanted = FetchPartition { max_bytes, ..FetchPartition::new(topic, partition, offset) };
        let (cols, next, _) =
            py.detach(|| fetch_columns(cluster, &wanted, max_records, &options(max_bytes, max_wait_ms)))?;
        Ok((columns_to_py(py, cols)?, next))
    }

    /// Appends `records` (as `Store.append` takes them; a record without a
    /// timestamp gets now) idempotently with acks=all; the first one's offset.
    #[pyo3(signature = (topic, partition, records, compression = "none"))]
    fn produce(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        records: &Bound<'_, PyAny>,
        compression: &str,
    ) -> PyResult<i64> {
        let codec = Compression::parse(compression)?;
        let items: Vec<InRecord> = records
            .try_iter()
            .map_err(|_| PyTypeError::new_err("records must be an iterable of bytes or tuples"))?
            .map(|r| extract_record(&r?))
            .collect::<pyo3::PyResult<_>>()?;
        let cluster = self.cluster()?;
        let result = py.detach(|| {
            let producer = {
                let mut slot = self.producer.lock();
                match &*slot {
                    Some(p) => p.clone(),
                    None => {
                        let p =
                            Arc::new(IdempotentProducer::new(cluster.clone(), ProducerConfig::default())?);
                        *slot = Some(p.clone());
                        p
                    }
                }
            };
            let now = seglog_core::clock::now_ms();
            with_new_records(&items, now, |recs| producer.send_with(topic, partition, recs, codec))
        })?;
        Ok(result.base_offset)
    }

    /// Every consumer group of the cluster (ListGroups to each broker), sorted:
    /// dicts with group_id, protocol_type and state (None from brokers below v4).
    fn list_groups<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let cluster = self.cluster()?;
        let groups = py.detach(|| admin::list_groups(cluster))?;
        let out = PyList::empty(py);
        for g in groups {
            let d = PyDict::new(py);
            d.set_item("group_id", g.group_id)?;
            d.set_item("protocol_type", g.protocol_type)?;
            d.set_item("state", g.state)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// DescribeGroups at each group's coordinator: dicts with group_id, state
    /// ("Dead" for an unknown group), protocol_type, protocol and members (dicts
    /// with member_id, group_instance_id, client_id, client_host and, for a
    /// consumer group, assignment as a list of (topic, partition)). The first
    /// group that fails raises.
    fn describe_groups<'py>(&self, py: Python<'py>, groups: Vec<String>) -> PyResult<Bound<'py, PyList>> {
        let cluster = self.cluster()?;
        let described = py.detach(|| admin::describe_groups(cluster, &groups));
        let out = PyList::empty(py);
        for g in described {
            let g = g?;
            let d = PyDict::new(py);
            d.set_item("group_id", &g.group_id)?;
            d.set_item("state", &g.state)?;
            d.set_item("protocol_type", &g.protocol_type)?;
            d.set_item("protocol", &g.protocol)?;
            let members = PyList::empty(py);
            for m in &g.members {
                members.append(member_dict(
                    py,
                    &g.protocol_type,
                    &m.member_id,
                    m.group_instance_id.as_deref(),
                    &m.client_id,
                    &m.client_host,
                    &m.assignment,
                )?)?;
            }
            d.set_item("members", members)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The committed (offset, metadata) per (topic, partition) of `group`: of
    /// `partitions`, or of all it committed (None). Uncommitted ones are absent.
    #[pyo3(signature = (group, partitions = None))]
    fn fetch_offsets(
        &self,
        py: Python<'_>,
        group: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> PyResult<GroupOffsets> {
        let cluster = self.cluster()?;
        Ok(py.detach(|| admin::fetch_offsets(cluster, group, partitions.as_deref()))?)
    }

    /// Commits (offset, metadata) per (topic, partition) for `group` as an
    /// admin tool: generation -1, no member id, which the coordinator accepts
    /// only while the group has no members.
    fn commit_offsets(&self, py: Python<'_>, group: &str, offsets: GroupOffsets) -> PyResult<()> {
        let cluster = self.cluster()?;
        Ok(py.detach(|| admin::commit_offsets(cluster, group, &offsets))?)
    }

    /// Deletes the groups with their offsets (each must have no members); the
    /// first that fails raises, after every one was tried.
    fn delete_groups(&self, py: Python<'_>, groups: Vec<String>) -> PyResult<()> {
        let cluster = self.cluster()?;
        let results = py.detach(|| admin::delete_groups(cluster, &groups));
        for r in results {
            r?;
        }
        Ok(())
    }

    /// Drops the idle connections (the next call reconnects).
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.cluster.close());
    }
}
