//! The template node of a group (filled in by its own commit).
