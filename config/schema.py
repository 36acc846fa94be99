"""Post-processing of the generated OpenAPI schema, so that it says what the API does:

- every error is `application/problem+json` with the Problem shape, and every operation lists the
  problems it can answer with (401 and 429 everywhere, 400 where it takes input, 404 where it
  names an object, 413 where it takes a body), from one table here instead of per view;
- an empty query parameter means "not given" (DRF's reading), so it has no minimum length;
- a request body refuses unknown fields (`additionalProperties: false`) when its serializer does
  (`memory.validation.RejectUnknownFieldsMixin`).
"""

from memory.validation import RejectUnknownFieldsMixin

PROBLEM = "application/problem+json"
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
STANDARD_PROBLEMS = {
    "400": "Invalid input (`errors` names each field); nothing was written.",
    "401": "Missing, unknown or revoked token.",
    "403": "Outside what the token allows.",
    "404": "No such object in your scope.",
    "409": "Stale version, or the transition does not apply.",
    "413": "The request body is too large.",
    "429": "Rate limited; see Retry-After.",
}


def _problem_response(code: str) -> dict:
    response = {"description": STANDARD_PROBLEMS[code], "content": {PROBLEM: {"schema": PROBLEM_REF}}}
    if code == "429":
        response["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}
    return response


def _problems_for(path: str, method: str, operation: dict) -> set[str]:
    codes = {"401", "403", "429"}
    if operation.get("requestBody") or any(p.get("in") == "query" for p in operation.get("parameters", [])):
        codes.add("400")
    if operation.get("requestBody"):
        codes.add("413")
    if "{" in path or any(p.get("name") == "page" for p in operation.get("parameters", [])):
        codes.add("404")  # an unknown id, or a page past the end
    if method == "post" and "{" in path:
        codes.add("409")
    return codes


def _strict_component_names() -> set[str]:
    names, pending = set(), list(RejectUnknownFieldsMixin.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        base = cls.__name__.removesuffix("Serializer")
        names.update({base, f"{base}Request"})
    return names


def problem_responses(result, generator, request, public):
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: problems and strict bodies, as above."""
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for code, response in responses.items():
                content = response.get("content", {})
                if code.startswith(("4", "5")) and "application/json" in content:
                    response["content"] = {PROBLEM: content.pop("application/json")}
            for code in sorted(_problems_for(path, method, operation)):  # one order: the schema is stable
                responses.setdefault(code, _problem_response(code))
            for parameter in operation.get("parameters", []):
                # DRF reads an empty query value as "not given", so an empty string is allowed.
                if parameter.get("in") == "query":
                    parameter["allowEmptyValue"] = True
                    parameter.get("schema", {}).pop("minLength", None)
    strict = _strict_component_names()
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name in strict and component.get("type") == "object":
            component["additionalProperties"] = False
    return result
