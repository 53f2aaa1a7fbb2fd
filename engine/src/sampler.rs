//! llama2.c run.c's sampler: argmax at temperature 0, otherwise temperature-scaled softmax and
//! multinomial or top-p (nucleus) sampling with run.c's xorshift RNG. All arithmetic is f32 in
//! run.c's order, so a seed gives the same tokens as run.c.
//!
//! Like run.c's `Sampler`, this takes its parameters as given: run.c's `main` clamps a negative
//! temperature to 0, an out-of-range top-p to 0.9 and replaces seed 0 by the time before it
//! builds the sampler, and callers that want that must do the same.

use std::cmp::Ordering;

use crate::{Error, Result};

/// run.c's `random_u32`: xorshift64* on `state`, upper 32 bits of the product.
fn random_u32(state: &mut u64) -> u32 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
}

/// run.c's `random_f32`: a float in [0, 1) from the top 24 bits of `random_u32`.
fn random_f32(state: &mut u64) -> f32 {
    (random_u32(state) >> 8) as f32 / 16_777_216.0
}

/// The index of the first largest value (0 for an empty slice). NaNs are never larger.
pub fn argmax(x: &[f32]) -> u32 {
    let mut max_i = 0;
    let Some(&first) = x.first() else { return 0 };
    let mut max_p = first;
    for (i, &p) in x.iter().enumerate().skip(1) {
        if p > max_p {
            max_i = i;
            max_p = p;
        }
    }
    max_i as u32
}

/// Softmax in place: max, `exp(x - max)`, sum, divide (run.c's order). The
/// reference decoder's attention uses it too.
pub fn softmax(x: &mut [f32]) {
    let Some(&first) = x.first() else { return };
    let mut max = first;
    for &v in &x[1..] {
        if v > max {
            max = v;
        }
    }
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// An error naming the first logit that is not finite: an argmax or a softmax over it would
/// pick a token that means nothing.
pub fn check_finite(logits: &[f32]) -> Result<()> {
    match logits.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(Error::Model(format!(
            "logit {i} is {}: the forward pass produced a non-finite value (broken weights or metadata)",
            logits[i]
        ))),
        None => Ok(()),
    }
}

/// run.c's `sample_mult`: the first index whose cumulative probability exceeds `coin`.
fn sample_mult(probs: &[f32], coin: f32) -> u32 {
    let mut cdf = 0.0f32;
    for (i, &p) in probs.iter().enumerate() {
        cdf += p;
        if coin < cdf {
            return i as u32;
        }
    }
    probs.len().saturating_sub(1) as u32
}

/// run.c's sampler state.
#[derive(Clone, Debug)]
pub struct Sampler {
    vocab_size: usize,
    temperature: f32,
    topp: f32,
    rng_state: u64,
    /// Scratch for top-p: (probability, token index).
    probindex: Vec<(f32, u32)>,
}

impl Sampler {
    /// A sampler over the first `vocab_size` logits (run.c `build_sampler`).
    pub fn new(vocab_size: usize, temperature: f32, topp: f32, seed: u64) -> Self {
        Sampler {
            vocab_size,
            temperature,
            topp,
            rng_state: seed,
            probindex: Vec::new(),
        }
    }

    /// Pick the next token from `logits` (run.c `sample`). At temperature 0 this is the argmax
    /// and `logits` is left alone; otherwise `logits` is divided by the temperature and turned
    /// into probabilities in place, one random number is drawn, and top-p sampling is used when
    /// 0 < topp < 1, plain multinomial sampling otherwise. Only the first `vocab_size` logits
    /// take part.
    ///
    /// A logit that is not finite is an error (an argmax or a softmax over it would pick a
    /// token that means nothing), and so is a temperature small enough that a logit divided
    /// by it overflows f32 (run.c would sample from NaN probabilities there).
    pub fn sample(&mut self, logits: &mut [f32]) -> Result<u32> {
        let n = self.vocab_size.min(logits.len());
        let logits = &mut logits[..n];
        check_finite(logits)?;
        if self.temperature == 0.0 {
            return Ok(argmax(logits));
        }
        for q in logits.iter_mut() {
            *q /= self.temperature;
        }
        if let Some(i) = logits.iter().position(|v| !v.is_finite()) {
            return Err(Error::Invalid(format!(
                "temperature {:e}: logit {i} divided by it overflows f32 ({}); use a larger temperature, or 0 for the argmax",
                self.temperature, logits[i]
            )));
        }
        softmax(logits);
        let coin = random_f32(&mut self.rng_state);
        Ok(if self.topp <= 0.0 || self.topp >= 1.0 {
            sample_mult(logits, coin)
        } else {
            self.sample_topp(logits, coin)
        })
    }

    /// run.c's `sample_topp`: keep the probabilities of at least `(1 - topp) / (n - 1)`, sort
    /// them descending (stably, as glibc's merge-sort `qsort` does), cut after the cumulative
    /// probability first exceeds `topp`, and sample from what is left. When nothing passes the
    /// cutoff (run.c reads out of bounds there) the most probable token is returned.
    fn sample_topp(&mut self, probs: &[f32], coin: f32) -> u32 {
        let n = probs.len();
        let cutoff = (1.0f32 - self.topp) / (n as i64 - 1) as f32;
        let kept = &mut self.probindex;
        kept.clear();
        kept.extend(
            probs
                .iter()
                .enumerate()
                .filter(|(_, &p)| p >= cutoff)
                .map(|(i, &p)| (p, i as u32)),
        );
        if kept.is_empty() {
            return argmax(probs);
        }
        // Kept probabilities are never NaN, so this is a total order.
        kept.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));

        let mut cumulative_prob = 0.0f32;
        let mut last_idx = kept.len() - 1;
        for (i, &(p, _)) in kept.iter().enumerate() {
            cumulative_prob += p;
            if cumulative_prob > self.topp {
                last_idx = i;
                break;
            }
        }
        let r = coin * cumulative_prob;
        let mut cdf = 0.0f32;
        for &(p, index) in &kept[..=last_idx] {
            cdf += p;
            if r < cdf {
                return index;
            }
        }
        kept[last_idx].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_matches_run_c_for_seed_42() {
        // xorshift64* by hand (Python big ints, masked to 64 bits) for state 42.
        let mut s = 42u64;
        let got: Vec<u32> = (0..4).map(|_| random_u32(&mut s)).collect();
        assert_eq!(got, [1456360119, 3359763283, 3393612768, 4054632243]);
        let mut s = 42u64;
        assert_eq!(random_f32(&mut s), (1456360119u32 >> 8) as f32 / 16777216.0);
        assert_eq!(random_f32(&mut s), 13_124_075.0 / 16_777_216.0);
        // Seed 0 is a fixed point of xorshift: every draw is 0.
        let mut s = 0u64;
        assert_eq!((random_u32(&mut s), random_u32(&mut s)), (0, 0));
    }

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 2.0, 3.0]), 1);
        assert_eq!(argmax(&[5.0, 5.0]), 0);
        assert_eq!(argmax(&[f32::NAN, 1.0, 0.5]), 0);
        assert_eq!(argmax(&[0.0, f32::NAN, 2.0]), 2);
        assert_eq!(argmax(&[]), 0);
        assert_eq!(argmax(&[-1.0, f32::INFINITY, f32::INFINITY]), 1);
    }

    #[test]
    fn softmax_in_run_c_order() {
        let mut x = [1.0f32, 2.0, 3.0];
        softmax(&mut x);
        let e = [(-2.0f32).exp(), (-1.0f32).exp(), 1.0];
        let sum = e[0] + e[1] + e[2];
        assert_eq!(x, [e[0] / sum, e[1] / sum, e[2] / sum]);
        let mut x = [0.0f32; 4];
        softmax(&mut x);
        assert_eq!(x, [0.25; 4]);
        let mut x: [f32; 0] = [];
        softmax(&mut x);
    }

    #[test]
    fn multinomial_walks_the_cdf() {
        let p = [0.1f32, 0.2, 0.3, 0.4];
        assert_eq!(sample_mult(&p, 0.0), 0);
        assert_eq!(sample_mult(&p, 0.05), 0);
        assert_eq!(sample_mult(&p, 0.1), 1); // coin < cdf is strict
        assert_eq!(sample_mult(&p, 0.35), 2);
        assert_eq!(sample_mult(&p, 0.999), 3);
        assert_eq!(sample_mult(&[0.2, 0.2], 0.9), 1); // past the total: the last index
        assert_eq!(sample_mult(&[], 0.5), 0);
    }

    #[test]
    fn top_p_keeps_the_nucleus() {
        let p = [0.1f32, 0.2, 0.3, 0.4];
        let mut s = Sampler::new(4, 1.0, 0.5, 1);
        // cutoff (1 - 0.5) / 3 drops 0.1; sorted 0.4, 0.3, 0.2; cumulative passes 0.5 at 0.3,
        // so the nucleus is {3, 2} with mass 0.7 and r = coin * 0.7.
        assert_eq!(s.sample_topp(&p, 0.0), 3);
        assert_eq!(s.sample_topp(&p, 0.5), 3); // r = 0.35 < 0.4
        assert_eq!(s.sample_topp(&p, 0.6), 2); // r = 0.42
        assert_eq!(s.sample_topp(&p, 0.999), 2);
        // Equal probabilities keep index order (stable sort); the 4th never makes the nucleus.
        let q = [0.25f32; 4];
        let mut s = Sampler::new(4, 1.0, 0.6, 1);
        assert_eq!(s.sample_topp(&q, 0.0), 0);
        assert_eq!(s.sample_topp(&q, 0.5), 1); // r = 0.375
        assert_eq!(s.sample_topp(&q, 0.9), 2); // r = 0.675
        assert_eq!(s.sample_topp(&q, 0.99999), 2);
        // Stability with ties that are not in index order already.
        let q = [0.1f32, 0.3, 0.2, 0.3, 0.1];
        let mut s = Sampler::new(5, 1.0, 0.55, 1);
        // Sorted: (0.3, 1), (0.3, 3), (0.2, 2), ...; nucleus {1, 3}, mass 0.6.
        assert_eq!(s.sample_topp(&q, 0.49), 1);
        assert_eq!(s.sample_topp(&q, 0.51), 3);
        // Nothing reaches the cutoff (run.c reads out of bounds): the most probable token.
        let mut s = Sampler::new(2, 1.0, 0.1, 1);
        assert_eq!(s.sample_topp(&[0.4, 0.6], 0.3), 1);
        assert_eq!(s.sample_topp(&[0.5, 0.5], 0.3), 0);
        assert_eq!(s.sample_topp(&[1.0], 0.3), 0);
    }

    #[test]
    fn sample_uses_temperature_softmax_and_the_rng() {
        // Temperature 0: argmax, logits untouched, no RNG draw.
        let mut s = Sampler::new(4, 0.0, 0.9, 42);
        let mut l = [0.5f32, 2.0, 2.0, -1.0];
        assert_eq!(s.sample(&mut l).unwrap(), 1);
        assert_eq!(l, [0.5, 2.0, 2.0, -1.0]);
        // Uniform over 4: seed 42's coins 0.339, 0.782, 0.790, 0.944 pick 1, 3, 3, 3.
        for topp in [0.0, 1.0, 0.9] {
            let mut s = Sampler::new(4, 1.0, topp, 42);
            let picks: Vec<u32> = (0..4)
                .map(|_| s.sample(&mut [0.0f32; 4]).unwrap())
                .collect();
            assert_eq!(picks, [1, 3, 3, 3], "topp {topp}");
        }
        // Logits are divided by the temperature and softmaxed in place.
        let mut s = Sampler::new(2, 2.0, 0.0, 42);
        let mut l = [2.0f32, 4.0];
        s.sample(&mut l).unwrap();
        let mut want = [1.0f32, 2.0];
        softmax(&mut want);
        assert_eq!(l, want);
        // Only the first vocab_size logits take part.
        let mut s = Sampler::new(2, 0.0, 0.0, 42);
        assert_eq!(s.sample(&mut [0.0, 1.0, 9.0]).unwrap(), 1);
        let mut s = Sampler::new(2, 1.0, 0.0, 42);
        let mut l = [0.0f32, 0.0, 9.0];
        s.sample(&mut l).unwrap();
        assert_eq!(l, [0.5, 0.5, 9.0]);
    }

    #[test]
    fn sample_refuses_non_finite_logits_and_a_temperature_that_overflows_them() {
        // A NaN or an infinity among the logits: an error at any temperature, naming the logit.
        for t in [0.0f32, 1.0] {
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut s = Sampler::new(3, t, 0.9, 1);
                let e = s.sample(&mut [0.0, bad, 1.0]).unwrap_err().to_string();
                assert!(e.contains("logit 1 is"), "{e}");
            }
        }
        // Past vocab_size the logits take no part, finite or not.
        let mut s = Sampler::new(2, 0.0, 0.9, 1);
        assert_eq!(s.sample(&mut [0.0, 1.0, f32::NAN]).unwrap(), 1);
        // 30 / 1e-38 overflows f32: refused with the temperature named, not sampled from NaNs.
        let mut s = Sampler::new(2, 1e-38, 0.9, 1);
        let e = s.sample(&mut [0.0, 30.0]).unwrap_err().to_string();
        assert!(e.contains("temperature 1e-38"), "{e}");
        // The smallest temperature that keeps them finite still samples (the larger one).
        let mut s = Sampler::new(2, 1e-37, 0.9, 1);
        assert_eq!(s.sample(&mut [0.0, 30.0]).unwrap(), 1);
    }
}
