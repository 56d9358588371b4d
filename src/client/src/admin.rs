//! Admin requests that need no coordinator: CreateTopics and DeleteTopics,
//! sent to the controller as Kafka's admin client does. A broker that does not
//! serve them answers with UNSUPPORTED_VERSION naming the API.

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use seglog_core::error::Result;

use crate::cluster::Cluster;
use crate::errors::{self, About};

/// A topic to create: -1 partitions or replication factor for the broker's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

fn timeout_ms(cluster: &Cluster) -> i32 {
    i32::try_from(cluster.config().request_timeout.as_millis()).unwrap_or(i32::MAX)
}

/// The node to send admin requests to: the controller, or any broker.
fn controller(cluster: &Cluster) -> Result<i32> {
    let m = cluster.refresh(Some(&[]), false)?;
    Ok(if m.brokers.contains_key(&m.controller_id) {
        m.controller_id
    } else {
        m.brokers.keys().next().copied().unwrap_or(-1)
    })
}

/// Creates `topics`; one result per topic, in order.
pub fn create_topics(cluster: &Cluster, topics: &[NewTopic]) -> Result<Vec<Result<()>>> {
    let request = CreateTopicsRequest::default().with_timeout_ms(timeout_ms(cluster)).with_topics(
        topics
            .iter()
            .map(|t| {
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                    .with_num_partitions(t.partitions)
                    .with_replication_factor(t.replication_factor)
                    .with_configs(
                        t.configs
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(StrBytes::from_string(k.clone()))
                                    .with_value(Some(StrBytes::from_string(v.clone())))
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    let answer = cluster.send(controller(cluster)?, &request)?;
    Ok(topics
        .iter()
        .map(|t| {
            let r = answer.topics.iter().find(|r| r.name.0.as_str() == t.name);
            match r {
                Some(r) if r.error_code == errors::NONE => Ok(()),
                Some(r) => {
                    let message = r.error_message.as_ref().map(|m| m.to_string());
                    Err(errors::from_code(
                        r.error_code,
                        About {
                            api: "CreateTopics",
                            topic: &t.name,
                            partition: -1,
                            message: message.as_deref(),
                        },
                    ))
                }
                None => Err(errors::protocol(
                    "the controller",
                    format!("no CreateTopics answer for {:?}", t.name),
                )),
            }
        })
        .collect())
}

/// Deletes `topics`; one result per topic, in order.
pub fn delete_topics(cluster: &Cluster, topics: &[String]) -> Result<Vec<Result<()>>> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(timeout_ms(cluster))
        .with_topic_names(topics.iter().map(|t| TopicName(StrBytes::from_string(t.clone()))).collect());
    let answer = cluster.send(controller(cluster)?, &request)?;
    for t in topics {
        cluster.invalidate(t);
    }
    Ok(topics
        .iter()
        .map(|t| {
            let r = answer.responses.iter().find(|r| r.name.as_ref().is_some_and(|n| n.0.as_str() == t));
            match r {
                Some(r) if r.error_code == errors::NONE => Ok(()),
                Some(r) => {
                    let message = r.error_message.as_ref().map(|m| m.to_string());
                    Err(errors::from_code(
                        r.error_code,
                        About { api: "DeleteTopics", topic: t, partition: -1, message: message.as_deref() },
                    ))
                }
                None => Err(errors::protocol("the controller", format!("no DeleteTopics answer for {t:?}"))),
            }
        })
        .collect())
}
