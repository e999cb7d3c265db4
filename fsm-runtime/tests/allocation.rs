//! What the runtime's success path allocates, counted by a global allocator
//! that counts the allocations of the thread asking (the test harness's other
//! threads do not disturb the count).
//!
//! Issue #18 asks for "fewer allocations ... no `String` built on the success
//! path": an action on an object named by an `ObjectId` allocates nothing once
//! the object has run one (its holder's box is kept, its history bounded and
//! full), and an id made from text allocates once, its text and hash together.

// A global allocator is `unsafe` to implement: the one place in the workspace,
// a test's, each call passed to the system's unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;

use fsm_runtime::{Actor, MemoryStore, ObjectId, Runtime};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged; the count is
// a thread-local `Cell` with a constant initializer, which neither allocates
// nor runs a destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: as for `dealloc`, and the caller's contract for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// How many allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn runtime() -> Runtime {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml");
    let machine = fsm_core::spec::load(spec).unwrap();
    Runtime::new(machine, MemoryStore::new().keep_history(4)).unwrap()
}

#[test]
fn an_id_made_from_text_allocates_once() {
    // The first id of the process draws the hash's seed.
    drop(ObjectId::from("vm-0"));
    assert_eq!(allocations(|| drop(black_box(ObjectId::from("vm-1")))), 1);
    let text = String::from("a-longer-id-0f8fad5b-d9cb-469f-a165-70867728950e");
    assert_eq!(allocations(|| drop(black_box(ObjectId::from(&text)))), 1);
    // Read from JSON, in place: no `String` first.
    let json = r#""vm-1""#;
    let read = allocations(|| drop(black_box(serde_json::from_str::<ObjectId>(json).unwrap())));
    assert_eq!(read, 1);
    let refused = serde_json::from_str::<ObjectId>("7")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("an object's id, as a string"), "{refused}");
}

#[test]
fn an_action_allocates_nothing_but_the_id_it_is_given_as_text() {
    let rt = runtime();
    let ops = Actor::new("ops");
    let vm = ObjectId::from("vm-1");
    rt.create(&vm, &ops).unwrap();
    rt.start(&vm, &ops, "deploy").unwrap().complete().unwrap();
    let reboot = |id: &ObjectId| rt.start(id, &ops, "reboot").unwrap().complete().unwrap();
    // The first action boxes the holder the object then keeps; a few more
    // fill the bounded history.
    for _ in 0..8 {
        reboot(&vm);
    }
    assert_eq!(allocations(|| drop(black_box(reboot(&vm)))), 0);
    let by_text = allocations(|| {
        let held = rt.start("vm-1", &ops, "reboot").unwrap();
        black_box(held.complete().unwrap());
    });
    assert_eq!(by_text, 1, "the handle's own id, made from the text");
    assert_eq!(rt.history(&vm).unwrap().len(), 4);
}
