//! What a fairy's requests report to the webhooks (`fairy.request.ended`, docs/webhooks.md):
//! the request's id, why it ended and the model tokens it used, gathered from the runtime's
//! own events as they are emitted; the same tally, with the cost of the priced calls, is what
//! the request's last chat item carries as `usage` ([`RequestReport::so_far`]).
//!
//! The [`Emitter`] is where a fairy's events go: its observers, and, once a request ends, the
//! room's webhooks (through this tally). It is a value of its own so that a turn's stages
//! (compaction, for one) tell what they did without borrowing the whole runtime.
//!
//! Must not touch the store; its one write to the document is the request's usage on its last
//! chat item ([`Emitter::write_usage`]).

use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::agent::runtime::events::AgentEvent;
use crate::agent::state::fairy::ChatUsage;
use crate::ids::{FairyId, RequestId};
use crate::room::Room;
use crate::webhooks::RequestUsage;

/// Where a fairy's events go: its observers (a bounded broadcast: a slow one misses events),
/// and the room's webhooks when a request ends.
pub(super) struct Emitter {
    events: broadcast::Sender<AgentEvent>,
    /// The running request's tally for the webhooks and its last chat item.
    report: Mutex<RequestReport>,
    room: Arc<Room>,
    fairy: FairyId,
}

impl Emitter {
    /// Events of fairy `fairy` of `room`, sent on `events`.
    pub fn new(events: broadcast::Sender<AgentEvent>, room: Arc<Room>, fairy: FairyId) -> Self {
        Emitter {
            events,
            report: Mutex::default(),
            room,
            fairy,
        }
    }

    /// Tells `event` to the observers (and a request's end to the webhooks).
    pub fn emit(&self, event: AgentEvent) {
        // Tallied with or without webhooks: the request's last chat item carries its usage.
        let ended = self
            .report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(&event);
        if let Some(webhooks) = self.room.webhooks()
            && let Some(ended) = ended
        {
            webhooks.fairy_request_ended(
                self.room.name(),
                self.fairy.as_str(),
                &ended.request_id,
                ended.reason,
                ended.usage,
            );
        }
        // No observer is fine.
        let _ = self.events.send(event);
    }

    /// What the running request used so far (its last chat item's `usage`).
    pub fn usage_so_far(&self) -> ChatUsage {
        self.report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .so_far()
    }

    /// Puts what the request's model calls used on its last chat item (`usage`) of `request`
    /// (the running one), for every browser's chat; a request that made no call says nothing.
    pub fn write_usage(&self, request: Option<&RequestId>) {
        let usage = self.usage_so_far();
        let Some(request) = request else {
            return;
        };
        if usage.calls == 0 {
            return;
        }
        if let Err(error) = crate::agent::state::fairy::set_request_usage(
            self.room.doc(),
            &self.fairy,
            request,
            usage,
        ) {
            tracing::warn!(fairy = %self.fairy, %error, "request usage not written to chat");
        }
    }
}

/// The request running and what it used so far.
#[derive(Debug, Default)]
pub(super) struct RequestReport {
    request_id: Option<String>,
    usage: RequestUsage,
    /// US dollars of the calls whose model has a price (`None`: no priced call yet).
    cost_usd: Option<f64>,
    /// Whether a call's figures were an estimate.
    estimated: bool,
}

/// A request that ended: its id, why, and what it used.
#[derive(Debug, PartialEq)]
pub(super) struct Ended {
    pub request_id: String,
    pub reason: &'static str,
    pub usage: RequestUsage,
}

impl RequestReport {
    /// Takes an emitted event into account; a request's end is returned (once).
    pub fn observe(&mut self, event: &AgentEvent) -> Option<Ended> {
        match event {
            AgentEvent::RequestStarted { request_id, .. } => {
                *self = RequestReport {
                    request_id: Some(request_id.as_str().to_owned()),
                    usage: RequestUsage::default(),
                    cost_usd: None,
                    estimated: false,
                };
                None
            }
            AgentEvent::Usage {
                input_tokens,
                output_tokens,
                cache_read_input_tokens,
                cache_creation_input_tokens,
                cost_usd,
                estimated,
                ..
            } => {
                self.estimated |= *estimated;
                if let Some(cost) = cost_usd {
                    self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
                }
                let usage = &mut self.usage;
                usage.calls += 1;
                usage.input_tokens += input_tokens;
                usage.output_tokens += output_tokens;
                usage.cache_read_input_tokens += cache_read_input_tokens;
                usage.cache_creation_input_tokens += cache_creation_input_tokens;
                None
            }
            AgentEvent::RequestEnded { reason } => {
                let report = std::mem::take(self);
                Some(Ended {
                    request_id: report.request_id?,
                    reason: reason.name(),
                    usage: report.usage,
                })
            }
            _ => None,
        }
    }

    /// What the running request used so far (its chat item's `usage`).
    pub fn so_far(&self) -> ChatUsage {
        let u = &self.usage;
        ChatUsage {
            calls: u.calls,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cost_usd: self.cost_usd,
            estimated: self.estimated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::runtime::events::{EndReason, UsagePurpose};
    use crate::ids::RequestId;

    #[test]
    fn a_request_reports_its_id_reason_and_summed_usage_once() {
        let mut report = RequestReport::default();
        let id = RequestId::random();
        assert_eq!(
            report.observe(&AgentEvent::RequestEnded {
                reason: EndReason::Done
            }),
            None,
            "no request started here: nothing to report"
        );
        report.observe(&AgentEvent::RequestStarted {
            messages: vec![],
            request_id: id.clone(),
        });
        let call = crate::llm::Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_input_tokens: 1,
            cache_creation_input_tokens: 2,
        };
        report.observe(&AgentEvent::usage(UsagePurpose::Turn, &call, 1, None));
        report.observe(&AgentEvent::usage(
            UsagePurpose::Summary,
            &call,
            2,
            Some(0.5),
        ));
        let ended = report.observe(&AgentEvent::RequestEnded {
            reason: EndReason::Cancelled,
        });
        assert_eq!(
            ended,
            Some(Ended {
                request_id: id.as_str().to_owned(),
                reason: "cancelled",
                usage: RequestUsage {
                    calls: 2,
                    input_tokens: 20,
                    output_tokens: 10,
                    cache_read_input_tokens: 2,
                    cache_creation_input_tokens: 4,
                },
            })
        );
        assert_eq!(
            report.observe(&AgentEvent::RequestEnded {
                reason: EndReason::Done
            }),
            None
        );
        // A call counted by estimate marks the request's usage as estimated, until the next.
        assert!(!report.so_far().estimated);
        report.observe(&AgentEvent::usage(UsagePurpose::Turn, &call, 1, None).estimated(true));
        report.observe(&AgentEvent::usage(UsagePurpose::Turn, &call, 1, None));
        assert!(report.so_far().estimated);
        report.observe(&AgentEvent::RequestStarted {
            messages: vec![],
            request_id: RequestId::random(),
        });
        assert!(!report.so_far().estimated);
    }
}
