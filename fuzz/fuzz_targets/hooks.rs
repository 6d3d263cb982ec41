//! Every hook entry point (request decoding included) on arbitrary bytes: the first byte picks
//! the hook from the registry, the rest is the body. A hook may reject the body with a
//! RequestError; it must never panic. Then the body with one byte changed, added or taken out
//! (where and which also from the first byte) must get the same outcome from a memo that kept
//! the body as from an empty one: the same error, or for the hooks that make no certificates
//! (whose keys and signatures are drawn from the system's random source) the same answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metahooks_hooks::memo::Memo;
use metahooks_hooks::{HookContext, HOOKS};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let hook = &HOOKS[usize::from(selector) % HOOKS.len()];
    let run = |body: &[u8], memo: &Memo| {
        let ctx = HookContext {
            now: time::OffsetDateTime::from_unix_timestamp(1_780_315_200).unwrap(),
            rng: &ring::rand::SystemRandom::new(),
            memo,
        };
        (hook.run)(body, &ctx)
            .map(|out| out.body)
            .map_err(|e| (e.path, e.message))
    };
    let kept = Memo::default();
    if let Ok(out) = run(body, &kept) {
        assert!(!out.is_empty(), "{}: an empty 200", hook.id);
    }
    if body.is_empty() {
        return;
    }
    let mut changed = body.to_vec();
    let at = usize::from(selector) * 7919 % body.len();
    let byte = b" 0a\"{}[],:\\"[usize::from(selector) % 11];
    match selector % 3 {
        0 => changed[at] = byte,
        1 => changed.insert(at, byte),
        _ => drop(changed.remove(at)),
    }
    let (near, fresh) = (run(&changed, &kept), run(&changed, &Memo::default()));
    match (&near, &fresh) {
        (Ok(_), Ok(_))
            if hook.id.starts_with("cert-rotation") || hook.id.starts_with("mesh-root") => {}
        _ => assert_eq!(
            near, fresh,
            "{}: a memo that kept the body answers otherwise",
            hook.id
        ),
    }
});
