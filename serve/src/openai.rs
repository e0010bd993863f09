//! The OpenAI API's request and response shapes, as vLLM's OpenAI-compatible
//! server accepts and sends them (`/v1/completions`, `/v1/chat/completions`;
//! https://platform.openai.com/docs/api-reference and vLLM's
//! `entrypoints/openai/protocol.py`). Fields this server does not act on
//! (temperature, top_p, ...) are accepted and ignored, as vLLM does with
//! sampling settings a model cannot honour.

use serde_json::{json, Value};

/// Which endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

/// A request's prompt as the client sent it: the live engine tokenizes
/// text with the model's tokenizer; the twin counts words.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// `/v1/completions` with token ids.
    Ids(Vec<u32>),
    /// `/v1/completions` with text.
    Text(String),
    /// `/v1/chat/completions`: (role, content) per message.
    Chat(Vec<(String, String)>),
}

/// The parts of a request body the server acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub model: String,
    pub prompt: Prompt,
    /// The prompt's length as the twin counts it (token ids, or words).
    pub prompt_tokens: u32,
    /// `max_tokens` (or chat's `max_completion_tokens`), if given: any
    /// whole number, so that one above the server's `--max-tokens` is
    /// refused by that limit's name.
    pub max_tokens: Option<u64>,
    pub stream: bool,
    pub include_usage: bool,
    /// vLLM's `ignore_eos`: generate `max_tokens` whatever the model samples.
    pub ignore_eos: bool,
    /// vLLM's `min_tokens`: end-of-sequence cannot stop it before these.
    pub min_tokens: u32,
}

/// Tokens in a text prompt. The twin has no tokenizer: it counts
/// whitespace-separated words, so a client that wants exact lengths sends
/// one word per token (or token ids to `/v1/completions`).
pub fn count_words(text: &str) -> u32 {
    text.split_whitespace().count() as u32
}

fn field_u32(body: &Value, key: &str) -> Result<Option<u32>, String> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|&n| n <= u32::MAX as u64)
            .map(|n| Some(n as u32))
            .ok_or_else(|| format!("'{key}' must be a non-negative integer")),
    }
}

fn field_u64(body: &Value, key: &str) -> Result<Option<u64>, String> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("'{key}' must be a non-negative integer")),
    }
}

fn field_bool(body: &Value, key: &str) -> Result<bool, String> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("'{key}' must be a boolean")),
    }
}

fn prompt(p: &Value) -> Result<Prompt, String> {
    match p {
        Value::String(s) => Ok(Prompt::Text(s.clone())),
        Value::Array(items) => {
            if items
                .iter()
                .all(|v| v.as_u64().is_some_and(|n| n <= u32::MAX as u64))
            {
                return Ok(Prompt::Ids(
                    items
                        .iter()
                        .filter_map(Value::as_u64)
                        .map(|n| n as u32)
                        .collect(),
                ));
            }
            match items.as_slice() {
                [one] if one.is_string() || one.is_array() => prompt(one),
                _ => Err("'prompt' must be a string, a list of token ids, or a list of one of those (batched prompts are not supported)".into()),
            }
        }
        _ => Err("'prompt' must be a string or a list of token ids".into()),
    }
}

fn messages(messages: &Value) -> Result<Prompt, String> {
    let list = messages
        .as_array()
        .filter(|l| !l.is_empty())
        .ok_or("'messages' must be a non-empty list")?;
    let mut out = Vec::with_capacity(list.len());
    for m in list {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user")
            .to_string();
        let content = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Some(Value::Null) | None => String::new(),
            Some(_) => {
                return Err("a message's 'content' must be a string or a list of parts".into())
            }
        };
        out.push((role, content));
    }
    Ok(Prompt::Chat(out))
}

impl Prompt {
    /// The length the twin gives it: token ids, or whitespace-separated
    /// words of the text (of every message's content).
    pub fn words(&self) -> u32 {
        match self {
            Prompt::Ids(ids) => ids.len() as u32,
            Prompt::Text(t) => count_words(t),
            Prompt::Chat(m) => m.iter().map(|(_, c)| count_words(c)).sum(),
        }
    }
}

/// Reads a request body; `Err` is the message of a 400.
pub fn parse(endpoint: Endpoint, body: &[u8]) -> Result<Parsed, String> {
    let body: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not valid JSON: {e}"))?;
    if !body.is_object() {
        return Err("the body must be a JSON object".into());
    }
    let model = match body.get("model") {
        Some(Value::String(m)) => m.clone(),
        _ => return Err("'model' is required and must be a string".into()),
    };
    let prompt = match endpoint {
        Endpoint::Completions => prompt(body.get("prompt").ok_or("'prompt' is required")?)?,
        Endpoint::Chat => messages(body.get("messages").ok_or("'messages' is required")?)?,
    };
    let prompt_tokens = prompt.words();
    let max_tokens = match endpoint {
        Endpoint::Chat => match field_u64(&body, "max_completion_tokens")? {
            Some(n) => Some(n),
            None => field_u64(&body, "max_tokens")?,
        },
        Endpoint::Completions => field_u64(&body, "max_tokens")?,
    };
    if max_tokens == Some(0) {
        return Err("'max_tokens' must be at least 1".into());
    }
    if let Some(n) = field_u32(&body, "n")? {
        if n != 1 {
            return Err("only 'n' = 1 is supported".into());
        }
    }
    // vLLM's extensions (the twin never stops early; the live engine does
    // at end-of-sequence unless told to ignore it).
    let ignore_eos = field_bool(&body, "ignore_eos")?;
    let min_tokens = field_u32(&body, "min_tokens")?;
    if let (Some(min), Some(max)) = (min_tokens, max_tokens) {
        if min as u64 > max {
            return Err("'min_tokens' must not exceed 'max_tokens'".into());
        }
    }
    let stream = field_bool(&body, "stream")?;
    let include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(o @ Value::Object(_)) => field_bool(o, "include_usage")?,
        Some(_) => return Err("'stream_options' must be an object".into()),
    };
    Ok(Parsed {
        model,
        prompt,
        prompt_tokens,
        max_tokens,
        stream,
        include_usage,
        ignore_eos,
        min_tokens: min_tokens.unwrap_or(0),
    })
}

/// What every chunk and response of one request repeats.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub endpoint: Endpoint,
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
}

/// An OpenAI-style error object.
pub fn error(message: &str, kind: &str, code: u16) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The usage block.
pub fn usage(prompt: u32, completion: u32) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// One streamed chunk carrying `text` (the chat form carries it as a delta).
pub fn chunk(h: &Head<'_>, text: &str, finish: Option<&str>, include_usage: bool) -> Value {
    let (id, created, model) = (h.id, h.created, h.model);
    let mut v = match h.endpoint {
        Endpoint::Completions => json!({
            "id": id, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
        }),
        Endpoint::Chat => json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": finish}],
        }),
    };
    if include_usage {
        // OpenAI sends `usage: null` on every chunk but the last.
        v["usage"] = Value::Null;
    }
    v
}

/// The chat stream's first chunk: the assistant role, no content yet.
pub fn role_chunk(h: &Head<'_>, include_usage: bool) -> Value {
    let (id, created, model) = (h.id, h.created, h.model);
    let mut v = json!({
        "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}],
    });
    if include_usage {
        v["usage"] = Value::Null;
    }
    v
}

/// The last chunk when usage was asked for: no choices, the usage.
pub fn usage_chunk(h: &Head<'_>, prompt: u32, completion: u32) -> Value {
    let (id, created, model) = (h.id, h.created, h.model);
    let object = match h.endpoint {
        Endpoint::Completions => "text_completion",
        Endpoint::Chat => "chat.completion.chunk",
    };
    json!({"id": id, "object": object, "created": created, "model": model,
           "choices": [], "usage": usage(prompt, completion)})
}

/// A whole (non-streamed) response.
pub fn response(h: &Head<'_>, text: &str, finish: &str, prompt: u32, completion: u32) -> Value {
    let (id, created, model) = (h.id, h.created, h.model);
    match h.endpoint {
        Endpoint::Completions => json!({
            "id": id, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
            "usage": usage(prompt, completion),
        }),
        Endpoint::Chat => json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": finish}],
            "usage": usage(prompt, completion),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_as_text_ids_or_one_element_lists() {
        let p = |s: &str| parse(Endpoint::Completions, s.as_bytes());
        assert_eq!(
            p(r#"{"model":"m","prompt":"a b  c"}"#)
                .unwrap()
                .prompt_tokens,
            3
        );
        assert_eq!(
            p(r#"{"model":"m","prompt":[5,6,7,8]}"#)
                .unwrap()
                .prompt_tokens,
            4
        );
        assert_eq!(
            p(r#"{"model":"m","prompt":[[5,6]]}"#)
                .unwrap()
                .prompt_tokens,
            2
        );
        assert!(p(r#"{"model":"m","prompt":[[5],[6]]}"#).is_err());
        assert!(p(r#"{"model":"m","prompt":{}}"#).is_err());
        assert!(p(r#"{"model":"m"}"#).unwrap_err().contains("prompt"));
        assert!(p(r#"{"prompt":"x"}"#).unwrap_err().contains("model"));
        assert!(p("{not json").unwrap_err().contains("JSON"));
        assert!(p(r#"{"model":"m","prompt":"x","max_tokens":0}"#).is_err());
        assert!(p(r#"{"model":"m","prompt":"x","max_tokens":-3}"#).is_err());
        // Beyond u32 it still parses: the server refuses it by its limit.
        let big = p(r#"{"model":"m","prompt":"x","max_tokens":1000000000000}"#).unwrap();
        assert_eq!(big.max_tokens, Some(1_000_000_000_000));
        assert!(p(r#"{"model":"m","prompt":"x","n":2}"#).is_err());
        assert!(p(r#"{"model":"m","prompt":"x","max_tokens":2,"min_tokens":3}"#).is_err());
        let q = p(r#"{"model":"m","prompt":"x","max_tokens":9,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0.7}"#).unwrap();
        assert_eq!(
            (q.max_tokens, q.stream, q.include_usage),
            (Some(9), true, true)
        );
    }

    #[test]
    fn chat_counts_message_words_and_prefers_max_completion_tokens() {
        let q = parse(
            Endpoint::Chat,
            br#"{"model":"m","messages":[{"role":"user","content":"one two"},{"role":"user","content":[{"type":"text","text":"three"}]}],"max_tokens":4,"max_completion_tokens":6}"#,
        )
        .unwrap();
        assert_eq!((q.prompt_tokens, q.max_tokens), (3, Some(6)));
        assert!(parse(Endpoint::Chat, br#"{"model":"m","messages":[]}"#).is_err());
    }
}
