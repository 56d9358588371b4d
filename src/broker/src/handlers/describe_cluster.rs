//! DescribeCluster: this one broker, which is also the controller, and the
//! cluster id from `meta.properties`.

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Reply;
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::Shared;

/// Flexible from v0; v1 adds the endpoint type, v2 fenced brokers.
pub const VERSIONS: (i16, i16) = (0, 1);

/// Kafka's `EndpointType.BROKER`.
const ENDPOINT_BROKER: i8 = 1;

/// The cluster operations (Kafka's `AclOperation` ids) a client may be
/// allowed; without an authorizer, all of them.
const CLUSTER_OPERATIONS: &[i32] = &[5, 7, 8, 9, 10, 11, 12];

pub async fn handle(shared: &Arc<Shared>, r: DescribeClusterRequest, version: i16) -> Reply {
    let node = shared.config.node_id;
    let (host, port) = shared.advertised_here();
    let listener = shared.listener_name();
    let (controller, brokers) = match &shared.replication {
        None => (
            node,
            vec![DescribeClusterBroker::default()
                .with_broker_id(BrokerId(node))
                .with_host(StrBytes::from_string(host))
                .with_port(port)],
        ),
        Some(r) => {
            let view = r.view();
            let brokers = view
                .brokers
                .values()
                .filter_map(|b| Some((b, b.endpoint(&listener)?)))
                .map(|(b, e)| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(b.id))
                        .with_host(StrBytes::from_string(e.host.clone()))
                        .with_port(e.port)
                        .with_rack(b.rack.clone().map(StrBytes::from_string))
                })
                .collect();
            (view.controller.unwrap_or(-1), brokers)
        }
    };
    let cluster_id =
        shared.replication.as_ref().map_or_else(|| shared.cluster_id.clone(), |r| r.cluster_id());
    let mut response = DescribeClusterResponse::default()
        .with_endpoint_type(ENDPOINT_BROKER)
        .with_cluster_id(StrBytes::from_string(cluster_id))
        .with_controller_id(BrokerId(controller))
        .with_brokers(brokers);
    if r.include_cluster_authorized_operations {
        response.cluster_authorized_operations = CLUSTER_OPERATIONS
            .iter()
            .filter(|&&op| {
                Operation::from_wire(op as i8)
                    .is_some_and(|o| shared.authorize(o, ResourceType::Cluster, CLUSTER_NAME))
            })
            .map(|op| 1 << op)
            .sum();
    }
    if version >= 1 && r.endpoint_type != ENDPOINT_BROKER {
        response = DescribeClusterResponse::default()
            .with_error_code(ResponseError::MismatchedEndpointType.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type {}",
                if r.endpoint_type == 2 { "CONTROLLER".to_string() } else { r.endpoint_type.to_string() }
            ))));
    }
    shared.metrics.error("DescribeCluster", response.error_code);
    Reply::Message(Box::new(ResponseKind::DescribeCluster(response)))
}
