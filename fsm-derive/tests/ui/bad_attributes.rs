// Attribute mistakes: unknown keys, wrong value shapes, a non-unit variant.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = A, colour = "blue", diagram = sideways, serde = "off")]
#[fsm(action(go, from = A, to = B, speed = 3))]
enum E {
    #[fsm(transitional)]
    A,
    #[fsm(terminal = yes, remove = 3)]
    B(u8),
}

fn main() {}
