//! A model decorator that spaces a model's text out in time (`--llm-pace-ms`): each text
//! delta is delayed by the pace before it is passed on. The offline model answers in one
//! instant, so a fairy's whole drawing lands at once; paced, it draws shape by shape like a
//! model streaming over the network, which a demo (and the browser test of a person drawing
//! while a fairy draws) needs. Owns only the timing: events are passed on unchanged and in
//! order, and dropping the stream drops the inner one.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::types::{Model, ModelEvent, ModelRequest, ModelStream};

/// `inner`, with each text delta delayed by `pace` (`inner` itself when `pace` is zero).
pub fn paced(inner: Arc<dyn Model>, pace: Duration) -> Arc<dyn Model> {
    if pace.is_zero() {
        inner
    } else {
        Arc::new(PacedModel { inner, pace })
    }
}

/// See the module documentation.
pub struct PacedModel {
    inner: Arc<dyn Model>,
    pace: Duration,
}

impl Model for PacedModel {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let pace = self.pace;
        Box::pin(self.inner.stream(request).then(move |event| async move {
            if matches!(event, Ok(ModelEvent::TextDelta(_))) {
                tokio::time::sleep(pace).await;
            }
            event
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::OfflineModel;
    use crate::llm::types::{ChatMessage, ModelRequest};

    #[tokio::test]
    async fn text_is_spaced_out_and_unchanged() {
        let request = ModelRequest {
            messages: vec![ChatMessage::user("draw a house")],
            ..ModelRequest::default()
        };
        let collect = |model: Arc<dyn Model>| {
            let request = request.clone();
            async move {
                let started = std::time::Instant::now();
                let events: Vec<_> = model.stream(request).collect().await;
                let text: String = events
                    .iter()
                    .filter_map(|e| match e {
                        Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect();
                let deltas = events
                    .iter()
                    .filter(|e| matches!(e, Ok(ModelEvent::TextDelta(_))))
                    .count();
                (text, deltas, started.elapsed())
            }
        };
        let (plain, deltas, _) = collect(paced(Arc::new(OfflineModel), Duration::ZERO)).await;
        let pace = Duration::from_millis(2);
        let (slow, _, took) = collect(paced(Arc::new(OfflineModel), pace)).await;
        assert_eq!(plain, slow);
        assert!(deltas > 10, "{deltas}");
        assert!(took >= pace * deltas as u32, "{took:?}");
    }
}
