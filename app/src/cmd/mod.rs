//! One module per subcommand.

pub mod generate;
pub mod model;

use anyhow::Context;
use baro_engine::model::Model;

use crate::ModelArgs;

/// Load the model the user asked for (the embedded stories260K by default).
pub fn load_model(a: &ModelArgs) -> anyhow::Result<Model> {
    match &a.model {
        None => {
            let mut m = Model::embedded().context("loading the embedded stories260K model")?;
            if let Some(t) = &a.tokenizer {
                let bytes = std::fs::read(t).with_context(|| format!("reading {}", t.display()))?;
                m.tokenizer = baro_engine::tokenizer::Tokenizer::from_llama2c(&bytes, m.config.vocab_size)
                    .with_context(|| format!("tokenizer {}", t.display()))?;
            }
            Ok(m)
        }
        Some(p) => Model::open(p, a.tokenizer.as_deref()).with_context(|| format!("loading model {}", p.display())),
    }
}
