// Under single_mutator, one actor alone may move an object out of a state.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Init, single_mutator)]
#[fsm(roles(vpc-operator = "The VPC Operator", network-operator = "The Network Operator"))]
#[fsm(action(provision, from = Init, to = Provisioned, roles = vpc-operator))]
#[fsm(action(adopt, from = Init, to = Provisioned, roles = network-operator))]
enum Vpc {
    #[fsm(owner = vpc-operator)]
    Init,
    #[fsm(terminal)]
    Provisioned,
}

fn main() {}
