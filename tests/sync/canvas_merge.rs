//! The merge properties of issue 5 as proptests, over 2–3 replicas (a server where the fairy
//! lives and one or two users) with updates exchanged in random orders: (1) all replicas
//! converge; (2) after the fairy's final commit the document equals the users' edits plus only
//! the fairy's complete actions; (3) every user edit to a shape the fairy did not create
//! survives. The model is `fuzz/checks/merge.rs`, shared with the fuzz target.

// The merge model of `fuzz/checks/merge.rs`, loaded once in this binary (by `fuzz_corpus`).
use crate::fuzz_corpus::merge;

use merge::Op;
use proptest::prelude::*;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (any::<u8>(), any::<u8>()).prop_map(|(user, slot)| Op::Create { user, slot }),
        3 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(user, slot, x)| Op::Move { user, slot, x }),
        2 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(user, slot, color)| Op::Recolor { user, slot, color }),
        2 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(user, slot, text)| Op::Text { user, slot, text }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(user, slot)| Op::Delete { user, slot }),
        5 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(kind, target, value)| Op::FairyStep { kind, target, value }),
        2 => any::<bool>().prop_map(|commit| Op::FairyEnd { commit }),
        6 => (any::<u8>(), any::<u8>()).prop_map(|(link, pick)| Op::Deliver { link, pick }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn replicas_converge_and_reverts_keep_user_edits(
        ops in prop::collection::vec(op(), 1..80),
        users in 1usize..=2,
        client_base in any::<u32>(),
    ) {
        if let Err(e) = merge::run(&ops, users, client_base as u64) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn a_user_edit_during_a_tentative_move_survives_the_revert() {
    let ops = vec![
        Op::Create { user: 0, slot: 0 },
        Op::Deliver { link: 0, pick: 0 },
        Op::FairyStep {
            kind: 1,
            target: 0,
            value: 2,
        },
        Op::Deliver { link: 1, pick: 0 },
        Op::Move {
            user: 0,
            slot: 0,
            x: 7,
        },
        Op::Deliver { link: 0, pick: 0 },
        Op::FairyEnd { commit: false },
    ];
    assert_eq!(merge::run(&ops, 1, 1), Ok(()));
}

#[test]
fn a_user_edit_racing_tentative_versions_survives() {
    let ops = vec![
        Op::Create { user: 0, slot: 79 },
        Op::Deliver { link: 32, pick: 0 },
        Op::FairyStep {
            kind: 76,
            target: 0,
            value: 0,
        },
        Op::Create { user: 0, slot: 0 },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 0,
        },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 0,
        },
        Op::Deliver {
            link: 161,
            pick: 49,
        },
        Op::Text {
            user: 0,
            slot: 46,
            text: 0,
        },
    ];
    assert_eq!(merge::run(&ops, 1, 0), Ok(()));
}

#[test]
fn an_edit_in_flight_during_a_revert_still_wins() {
    // The user's move reaches the server only after the fairy reverted its tentative move of
    // the same key: the user's value must win (it does because the server's client id is
    // below the users', see `merge.rs`).
    let ops = vec![
        Op::Create { user: 71, slot: 33 },
        Op::Deliver { link: 234, pick: 0 },
        Op::Move {
            user: 127,
            slot: 42,
            x: 0,
        },
        Op::FairyStep {
            kind: 79,
            target: 0,
            value: 152,
        },
    ];
    assert_eq!(merge::run(&ops, 1, 402_992_081), Ok(()));
}

/// Kept as evidence, not as a property: with links that reorder one sender's updates, yrs
/// 0.28.1 can end with a pending delete set it never applies (same state vectors, different
/// content). WebSocket links are FIFO, so the server never sees this; run it with
/// `cargo test --test sync canvas_merge:: -- --ignored`.
#[test]
#[ignore = "yrs 0.28.1 keeps a pending delete set after out-of-order delivery on one link"]
fn out_of_order_delivery_on_one_link_can_diverge_in_yrs() {
    let ops = vec![
        Op::FairyStep {
            kind: 165,
            target: 0,
            value: 0,
        },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 0,
        },
        Op::FairyEnd { commit: true },
        Op::FairyStep {
            kind: 150,
            target: 0,
            value: 0,
        },
        Op::FairyEnd { commit: false },
        Op::FairyStep {
            kind: 44,
            target: 0,
            value: 0,
        },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 0,
        },
        Op::Deliver { link: 7, pick: 143 },
        Op::Deliver {
            link: 49,
            pick: 139,
        },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 0,
        },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 0,
        },
        Op::Deliver { link: 71, pick: 3 },
        Op::Create { user: 0, slot: 0 },
        Op::Deliver { link: 44, pick: 0 },
        Op::FairyStep {
            kind: 0,
            target: 0,
            value: 1,
        },
    ];
    assert_eq!(merge::run(&ops, 1, 0), Ok(()), "FIFO links converge");
    assert_eq!(merge::run_unordered(&ops, 1, 0), Ok(()));
}
