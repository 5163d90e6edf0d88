use super::*;

#[test]
fn stores_reads_and_frees_payloads_of_every_length() {
    let store = PayloadStore::new(1, 20);
    let mut out = Vec::new();
    for len in 0..=20 {
        let bytes: Vec<u8> = (0..len as u8).collect();
        let h = store.try_store(&bytes, len as u64, 1).unwrap().unwrap();
        assert_eq!(store.try_store(b"x", 0, 1), Ok(None), "one slot: full");
        assert_eq!(store.read(h, &mut out), Some(len as u64));
        assert_eq!(out, bytes);
        assert!(store.release_all(h));
        assert_eq!(store.free_slots(), 1);
    }
}

#[test]
fn a_slot_at_its_last_generation_is_retired_instead_of_wrapping() {
    let store = PayloadStore::new(2, 8);
    let h = store.try_store(b"a", 1, 1).unwrap().unwrap();
    let index = (h & REFS) as usize;
    assert!(store.release(h, 1));
    // As if the slot had been used u32::MAX - 1 times.
    store.meta[index]
        .state
        .store((LAST_GENERATION - 1) << GENERATION_SHIFT, Ordering::Relaxed);
    let (mut last, mut other) = (None, None);
    for _ in 0..2 {
        let h = store.try_store(b"b", 2, 1).unwrap().unwrap();
        if (h & REFS) as usize == index {
            last = Some(h);
        } else {
            other = Some(h);
        }
    }
    let last = last.expect("both slots taken");
    assert_eq!(last >> GENERATION_SHIFT, LAST_GENERATION);
    assert!(store.release(last, 1));
    assert!(store.release(other.unwrap(), 1));
    // Only the other slot comes back; the retired one stays counted in its part.
    assert_eq!(store.free_slots(), 1);
    assert_eq!(store.used(0), 1);
    let next = store.try_store(b"c", 3, 1).unwrap().unwrap();
    assert_ne!(
        (next & REFS) as usize,
        index,
        "a retired slot is not taken again"
    );
    assert_eq!(
        store.try_store(b"d", 4, 1),
        Ok(None),
        "the part is one slot less"
    );
    assert!(
        !store.release(last, 1),
        "the last generation's handle is stale"
    );
}

#[test]
fn refuses_a_payload_larger_than_a_slot() {
    let store = PayloadStore::new(1, 4);
    assert_eq!(
        store.try_store(b"12345", 0, 1),
        Err(TooLarge {
            len: 5,
            slot_size: 4
        })
    );
    assert_eq!(store.free_slots(), 1);
}

#[test]
fn a_stale_handle_never_releases_the_slots_next_message() {
    let store = PayloadStore::new(1, 8);
    let old = store.try_store(b"a", 1, 1).unwrap().unwrap();
    assert!(store.release(old, 1));
    let new = store.try_store(b"b", 2, 2).unwrap().unwrap();
    assert_eq!(old & REFS, new & REFS, "the same slot");
    assert!(!store.release(old, 1));
    assert_eq!(store.stale_handles(), 1);
    assert_eq!(store.publish_id(new), Some(2));
    assert_eq!(store.publish_id(old), None);
    assert!(store.release(new, 5), "more than are left: all");
    assert_eq!(store.free_slots(), 1);
}

#[test]
fn a_part_that_used_its_quota_is_refused_while_the_others_store() {
    let store = PayloadStore::try_split(4, 2, 8).unwrap();
    let a: Vec<u64> = (0..2)
        .map(|i| store.try_store_in(0, b"a", i, 1).unwrap().unwrap())
        .collect();
    assert_eq!(
        store.try_store_in(0, b"a", 9, 1),
        Ok(None),
        "part 0 is full"
    );
    assert_eq!(store.used(0), 2);
    assert_eq!(store.free_slots(), 2, "part 1's slots stay free for it");
    let b = store.try_store_in(1, b"b", 0, 1).unwrap().unwrap();
    assert!(store.try_store_in(1, b"b", 1, 1).unwrap().is_some());
    assert_eq!(store.try_store_in(1, b"b", 2, 1), Ok(None));
    // A slot freed goes back to the part that held it.
    assert!(store.release(a[0], 1));
    assert_eq!(store.used(0), 1);
    assert_eq!(store.try_store_in(1, b"b", 3, 1), Ok(None), "not part 1's");
    assert!(store.try_store_in(0, b"a", 4, 1).unwrap().is_some());
    assert!(store.release(b, 1));
    assert_eq!(store.used(1), 1);
    assert!(
        PayloadStore::try_split(1, 2, 8).is_err(),
        "a part of no slot"
    );
    assert!(PayloadStore::try_with_quotas(&[2, 0], 8).is_err());
}

#[test]
fn parts_under_their_quotas_always_find_a_slot_under_contention() {
    let store = std::sync::Arc::new(PayloadStore::try_split(8, 4, 8).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|part| {
            let store = store.clone();
            std::thread::spawn(move || {
                let rounds = if cfg!(miri) { 20 } else { 20_000 };
                for i in 0..rounds {
                    let h = store.try_store_in(part, b"x", i, 1).unwrap();
                    let h = h.expect("under its quota: a slot");
                    let h2 = store.try_store_in(part, b"y", i, 1).unwrap();
                    let h2 = h2.expect("two slots each");
                    assert_eq!(store.try_store_in(part, b"z", i, 1), Ok(None));
                    assert!(store.release(h, 1) && store.release(h2, 1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.free_slots(), 8);
    assert!((0..4).all(|p| store.used(p) == 0));
}
