"""JSON pointers (RFC 6901), as serde_json's `Value::pointer` reads them."""

_MISSING = object()


def get(value, pointer: str, default=None):
    """The value at `pointer` in `value` (`""` is `value` itself), or `default`."""
    if pointer == "":
        return value
    if not pointer.startswith("/"):
        return default
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value.get(token, _MISSING)
        elif isinstance(value, list) and token.isdigit() and (token == "0" or token[0] != "0"):
            i = int(token)
            value = value[i] if i < len(value) else _MISSING
        else:
            return default
        if value is _MISSING:
            return default
    return value
