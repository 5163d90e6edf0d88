use std::rc::Rc;
use zerodispatch_callback::Callback;

fn main() {
    // An `Rc` cannot cross threads, and a Callback is made to cross threads.
    let shared = Rc::new(5_u32);
    Callback::new(move || assert_eq!(*shared, 5)).call();
}
