//! A byte-level BPE tokenizer (GPT-2 style, as SmolLM2 and Llama 3 use) built
//! from the vocabulary and merges a GGUF file carries, so a real model can
//! turn text into token ids and back without a separate tokenizer file.
//!
//! Pre-tokenization approximates GPT-2's pattern: runs of letters, of digits,
//! of other symbols, each taking one leading space, and whitespace runs.
//! That is exact for ordinary prose such as the prompts here.

use crate::error::{input, Result};
use std::collections::HashMap;

/// Vocabulary, merge ranks and the byte ↔ character map of byte-level BPE.
pub struct Tokenizer {
    ids: HashMap<String, u32>,
    tokens: Vec<String>,
    ranks: HashMap<(String, String), usize>,
    byte_char: [char; 256],
    char_byte: HashMap<char, u8>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
}

/// GPT-2's reversible map from bytes to printable characters.
fn bytes_to_unicode() -> [char; 256] {
    let mut map = ['\0'; 256];
    let printable = |b: u32| {
        (b'!' as u32..=b'~' as u32).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut extra = 0u32;
    for b in 0u32..256 {
        map[b as usize] = if printable(b) {
            char::from_u32(b).expect("latin-1")
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("valid char")
        };
    }
    map
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_alphabetic() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Digit
    } else if c.is_whitespace() {
        Class::Space
    } else {
        Class::Other
    }
}

/// Splits text into pre-tokens: a word keeps the single space before it.
fn pre_tokenize(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = chars[i].0;
        let mut j = i;
        if chars[i].1 == ' ' && i + 1 < chars.len() && class(chars[i + 1].1) != Class::Space {
            j += 1;
        }
        let k = class(chars[j].1);
        j += 1;
        while j < chars.len() && class(chars[j].1) == k {
            // A space run stops before the space that leads the next word.
            if k == Class::Space
                && j + 1 < chars.len()
                && chars[j].1 == ' '
                && class(chars[j + 1].1) != Class::Space
            {
                break;
            }
            j += 1;
        }
        let end = if j < chars.len() {
            chars[j].0
        } else {
            text.len()
        };
        out.push(&text[start..end]);
        i = j;
    }
    out
}

impl Tokenizer {
    /// A tokenizer from a vocabulary (index = id) and merges ("a b" lines).
    pub fn new(
        tokens: Vec<String>,
        merges: &[String],
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Result<Tokenizer> {
        let mut ranks = HashMap::with_capacity(merges.len());
        for (r, m) in merges.iter().enumerate() {
            let (a, b) = m
                .split_once(' ')
                .ok_or_else(|| input(format!("tokenizer merge {r} ({m:?}) is not a pair")))?;
            ranks.insert((a.to_string(), b.to_string()), r);
        }
        let ids = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let byte_char = bytes_to_unicode();
        let char_byte = byte_char
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        Ok(Tokenizer {
            ids,
            tokens,
            ranks,
            byte_char,
            char_byte,
            bos,
            eos,
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of a token written exactly so (a special token such as
    /// `<|im_start|>`, which `encode` would spell out byte by byte).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// Token ids of `text` (no BOS added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for word in pre_tokenize(text) {
            let mut syms: Vec<String> = word
                .bytes()
                .map(|b| self.byte_char[b as usize].to_string())
                .collect();
            // Merge the lowest-ranked adjacent pair until none is in the table.
            loop {
                let best = syms
                    .windows(2)
                    .enumerate()
                    .filter_map(|(i, w)| {
                        self.ranks
                            .get(&(w[0].clone(), w[1].clone()))
                            .map(|&r| (r, i))
                    })
                    .min();
                let Some((_, i)) = best else { break };
                let merged = format!("{}{}", syms[i], syms[i + 1]);
                syms.splice(i..i + 2, [merged]);
            }
            for s in syms {
                let id = self
                    .ids
                    .get(&s)
                    .ok_or_else(|| input(format!("tokenizer: {s:?} is not in the vocabulary")))?;
                out.push(*id);
            }
        }
        Ok(out)
    }

    /// The text of token ids (special tokens included as written).
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            if let Some(t) = self.tokens.get(id as usize) {
                for c in t.chars() {
                    match self.char_byte.get(&c) {
                        Some(&b) => bytes.push(b),
                        None => bytes.extend(c.to_string().as_bytes()),
                    }
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_tokens_keep_one_leading_space() {
        assert_eq!(
            pre_tokenize("The capital of France is"),
            vec!["The", " capital", " of", " France", " is"]
        );
        assert_eq!(
            pre_tokenize("a,  b 12!"),
            vec!["a", ",", " ", " b", " 12", "!"]
        );
    }

    #[test]
    fn bpe_merges_by_rank_and_round_trips() {
        // Vocabulary of single bytes plus merges "Ġ c" → "Ġc", "a t" → "at", "Ġc at" → "Ġcat".
        let mut tokens: Vec<String> = bytes_to_unicode().iter().map(|c| c.to_string()).collect();
        tokens.extend(["Ġc", "at", "Ġcat"].map(String::from));
        let merges = ["Ġ c", "a t", "Ġc at"].map(String::from);
        let t = Tokenizer::new(tokens, &merges, None, None).unwrap();
        let ids = t.encode("a cat").unwrap();
        assert_eq!(ids, vec![b'a' as u32, 258]);
        assert_eq!(t.decode(&ids), "a cat");
        assert_eq!(t.decode(&t.encode("naïve 42\n").unwrap()), "naïve 42\n");
    }
}
