//! Node and pod prices from offerings (filled in by its own commit).
