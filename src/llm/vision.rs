//! Which models take images (`--llm-vision auto`): the screenshot part is sent only to a model
//! that reads it, because a text-only endpoint answers an image part with HTTP 400.
//!
//! Owns the decision only; the image parts' wire formats are in [`super::anthropic`] and
//! [`super::openai`], the screenshot itself in [`crate::agent`].

use crate::config::{LlmProvider, LlmVision, ServeConfig};

/// Families of OpenAI-compatible models known to accept `image_url` parts (prefixes of the
/// model name, lowercase; a name containing `vision` or `-vl` also counts).
const OPENAI_VISION: &[&str] = &[
    "gpt-4o",
    "gpt-4.1",
    "gpt-4-turbo",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-4o",
    "llava",
    "bakllava",
    "llama3.2-vision",
    "llama-3.2-vision",
    "llama4",
    "gemma3",
    "qwen2.5vl",
    "qwen2-vl",
    "minicpm-v",
    "pixtral",
    "mistral-small3.1",
    "moondream",
];

/// Whether `model` of `provider` accepts images. Every Claude model from 3 on does; the offline
/// model reads no images.
pub fn accepts_images(provider: LlmProvider, model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    // Names may carry a namespace (`library/llava:13b`, `openai/gpt-4o`).
    let base = model.rsplit('/').next().unwrap_or(&model);
    match provider {
        LlmProvider::Offline => false,
        LlmProvider::Anthropic => base.starts_with("claude"),
        LlmProvider::Openai => {
            OPENAI_VISION.iter().any(|p| base.starts_with(p))
                || base.contains("vision")
                || base.contains("-vl")
        }
    }
}

/// Whether fairy requests carry a screenshot: `on` and `off` say so; `auto` asks
/// [`accepts_images`] about the configured model (or the provider's default model).
pub fn vision_enabled(config: &ServeConfig) -> bool {
    match config.llm_vision {
        LlmVision::On => true,
        LlmVision::Off => false,
        LlmVision::Auto => {
            let default = match config.llm {
                LlmProvider::Anthropic => super::anthropic::DEFAULT_MODEL,
                LlmProvider::Openai => super::openai::DEFAULT_MODEL,
                LlmProvider::Offline => "",
            };
            accepts_images(config.llm, config.llm_model.as_deref().unwrap_or(default))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_knows_which_models_see() {
        assert!(accepts_images(LlmProvider::Anthropic, "claude-sonnet-4-5"));
        assert!(accepts_images(LlmProvider::Openai, "gpt-4o-mini"));
        assert!(accepts_images(LlmProvider::Openai, "library/llava:13b"));
        assert!(accepts_images(
            LlmProvider::Openai,
            "Qwen2.5-VL-7B-Instruct"
        ));
        assert!(!accepts_images(LlmProvider::Openai, "gpt-3.5-turbo"));
        assert!(!accepts_images(LlmProvider::Openai, "llama3.1:8b"));
        assert!(!accepts_images(LlmProvider::Offline, "anything"));
    }

    #[test]
    fn the_flag_overrides_auto() {
        let mut c = ServeConfig::for_test();
        assert!(!vision_enabled(&c), "the offline model reads no images");
        c.llm_vision = LlmVision::On;
        assert!(vision_enabled(&c));
        c.llm = LlmProvider::Anthropic;
        c.llm_vision = LlmVision::Auto;
        assert!(vision_enabled(&c), "the default Claude model sees");
        c.llm = LlmProvider::Openai;
        c.llm_model = Some("llama3.1:8b".into());
        assert!(!vision_enabled(&c));
        c.llm_vision = LlmVision::Off;
        c.llm_model = Some("gpt-4o".into());
        assert!(!vision_enabled(&c));
    }
}
