//! Random walks through a simulated cluster: a seeded random source and the seeds a walk test
//! runs. `WALK_SEED=<n>` replays one walk; `WALK_SEEDS=<count>` runs that many, from seed 1.

/// SplitMix64: small, fast and the same on every machine, so a seed replays its walk exactly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; `n` is not 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// One of `items`, which is not empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// `items` in a random order (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// The seeds to walk: the one `WALK_SEED` names, else `1..=WALK_SEEDS`, else `1..=default`.
pub fn seeds(default: u64) -> Vec<u64> {
    let number = |name: &str| {
        std::env::var(name).ok().map(|v| {
            v.parse::<u64>()
                .unwrap_or_else(|_| panic!("{name}={v}: a number"))
        })
    };
    if let Some(seed) = number("WALK_SEED") {
        return vec![seed];
    }
    (1..=number("WALK_SEEDS").unwrap_or(default)).collect()
}
