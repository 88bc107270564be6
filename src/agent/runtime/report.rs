//! What a fairy's requests report to the webhooks (`fairy.request.ended`, docs/webhooks.md):
//! the request's id, why it ended and the model tokens it used, gathered from the runtime's
//! own events as they are emitted.
//!
//! Owns only that tally; it sends nothing itself and must not touch the document or the store.

use crate::agent::host::events::AgentEvent;
use crate::webhooks::RequestUsage;

/// The request running and what it used so far.
#[derive(Debug, Default)]
pub(super) struct RequestReport {
    request_id: Option<String>,
    usage: RequestUsage,
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
                };
                None
            }
            AgentEvent::Usage {
                input_tokens,
                output_tokens,
                cache_read_input_tokens,
                cache_creation_input_tokens,
                ..
            } => {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::host::events::{EndReason, UsagePurpose};
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
    }
}
