//! Chat prompts for the template families real GGUF files carry, detected from
//! `tokenizer.chat_template` the way llama.cpp's `llm_chat_detect_template` does and written
//! by hand for one user message (no Jinja engine), as llama.cpp's built-in templates write it:
//!
//! - Llama 3 (`<|start_header_id|>` … `<|end_header_id|>`):
//!   `<|start_header_id|>user<|end_header_id|>\n\n{trimmed}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`
//! - ChatML (`<|im_start|>`, Qwen): `<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n`
//! - Mistral / Llama 2 (`[INST]`): `[INST] {prompt} [/INST]` and the Mistral v1/v3/v3-tekken/v7
//!   spacings of it.
//!
//! BOS is not part of the text: the tokenizer adds it as the vocabulary says. Any other
//! template, and a file without one, is refused with what was found.

use crate::{Error, Result};

/// A chat template family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatTemplate {
    /// Llama 3 header tokens.
    Llama3,
    /// ChatML (`<|im_start|>`).
    ChatMl,
    /// Llama 2 `[INST] … [/INST]` (`trim`: the template strips the message).
    Llama2 {
        /// The message is trimmed (`content.strip()` in the template).
        trim: bool,
    },
    /// Mistral v1: ` [INST] … [/INST]`.
    MistralV1,
    /// Mistral v3: `[INST] …[/INST]`.
    MistralV3,
    /// Mistral v3 tekken: `[INST]…[/INST]`.
    MistralV3Tekken,
    /// Mistral v7: `[INST] …[/INST]`.
    MistralV7,
}

impl ChatTemplate {
    /// The family of the Jinja template `tmpl` (`tokenizer.chat_template`), in llama.cpp's
    /// order of tests; `None` for a template none of the three families matches (the `model`
    /// argument only names the file in the error).
    pub fn detect(tmpl: Option<&str>, model: &str) -> Result<ChatTemplate> {
        let Some(t) = tmpl else {
            return Err(Error::Tokenizer(format!(
                "--chat: {model} has no tokenizer.chat_template, so its chat format is unknown (supported: Llama-3 header tokens, ChatML, Mistral/Llama-2 [INST])"
            )));
        };
        let has = |s: &str| t.contains(s);
        let refuse = |what: &str| {
            let head: String = t.chars().take(120).collect();
            Err(Error::Tokenizer(format!(
                "--chat: {model}'s tokenizer.chat_template is {what}, not one of the supported families (Llama-3 header tokens, ChatML, Mistral/Llama-2 [INST]); it begins {head:?}"
            )))
        };
        if has("<|im_start|>") {
            if has("<|im_sep|>") || has("<end_of_utterance>") {
                return refuse("a ChatML variant (<|im_sep|> or <end_of_utterance>)");
            }
            return Ok(ChatTemplate::ChatMl);
        }
        if t.starts_with("mistral") || has("[INST]") {
            if has("[SYSTEM_PROMPT]") {
                return Ok(ChatTemplate::MistralV7);
            }
            if has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]") {
                if has(" [INST]") {
                    return Ok(ChatTemplate::MistralV1);
                } else if has("\"[INST]\"") {
                    return Ok(ChatTemplate::MistralV3Tekken);
                }
                return Ok(ChatTemplate::MistralV3);
            }
            return Ok(ChatTemplate::Llama2 {
                trim: has("content.strip()"),
            });
        }
        if has("<|start_header_id|>") && has("<|end_header_id|>") {
            return Ok(ChatTemplate::Llama3);
        }
        refuse("of another family")
    }

    /// The prompt text for one user message, ready for the model to answer.
    pub fn user_prompt(self, msg: &str) -> String {
        match self {
            ChatTemplate::Llama3 => format!(
                "<|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                msg.trim()
            ),
            ChatTemplate::ChatMl => {
                format!("<|im_start|>user\n{msg}<|im_end|>\n<|im_start|>assistant\n")
            }
            ChatTemplate::Llama2 { trim } => {
                format!("[INST] {} [/INST]", if trim { msg.trim() } else { msg })
            }
            ChatTemplate::MistralV1 => format!(" [INST] {msg} [/INST]"),
            ChatTemplate::MistralV3 => format!("[INST] {msg}[/INST]"),
            ChatTemplate::MistralV3Tekken => format!("[INST]{msg}[/INST]"),
            ChatTemplate::MistralV7 => format!("[INST] {msg}[/INST]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLAMA3: &str = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}";
    const QWEN: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    const MISTRAL: &str = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";

    #[test]
    fn the_three_families_are_detected_and_written_for_one_user_message() {
        let t = ChatTemplate::detect(Some(LLAMA3), "f").expect("llama3");
        assert_eq!(t, ChatTemplate::Llama3);
        assert_eq!(
            t.user_prompt(" Hi "),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        let t = ChatTemplate::detect(Some(QWEN), "f").expect("chatml");
        assert_eq!(t, ChatTemplate::ChatMl);
        assert_eq!(
            t.user_prompt("Hi"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let t = ChatTemplate::detect(Some(MISTRAL), "f").expect("inst");
        assert_eq!(t, ChatTemplate::Llama2 { trim: false });
        assert_eq!(t.user_prompt("Hi"), "[INST] Hi [/INST]");
    }

    #[test]
    fn other_templates_and_a_missing_one_are_refused_saying_what_was_found() {
        let e =
            ChatTemplate::detect(Some("{{ '<start_of_turn>user' }}"), "g.gguf").expect_err("gemma");
        let e = e.to_string();
        assert!(
            e.contains("g.gguf") && e.contains("<start_of_turn>user"),
            "{e}"
        );
        let e = ChatTemplate::detect(None, "g.gguf")
            .expect_err("none")
            .to_string();
        assert!(e.contains("no tokenizer.chat_template"), "{e}");
    }
}
