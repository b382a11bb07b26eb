"""Names vulture cannot see used, reviewed (issue 43): each group says why it is alive.
Regenerate candidates with `vulture --make-whitelist`; add a name here only with a reason."""
# ruff: noqa
# mypy: ignore-errors

_ = object()

# module __getattr__: Python calls it for lazy attributes (modelreg.Registry, …)
__getattr__  # modelreg/__init__.py:33
# Registry parts held for the Delegate descriptors (api/delegate.py reads them by name)
_._core  # modelreg/api/__init__.py:154
_._uploads  # modelreg/api/__init__.py:159
_._rollback  # modelreg/api/__init__.py:162
_._records  # modelreg/api/__init__.py:163
_._browse  # modelreg/api/__init__.py:164
_._team  # modelreg/api/__init__.py:165
_._fleet  # modelreg/api/__init__.py:166
# tests/api/test_reference.py asks it: every public name documented
undocumented  # modelreg/api/reference.py:173
# bom.py: a public helper the ML-BOM tests use to resolve refs
refs  # modelreg/bom.py:415
# bundled.py: what the tests, the demo and benchmarks install and read
SMOLLM2_QUANT_REPO  # modelreg/bundled.py:19
SMOLLM2_QUANT_REVISION  # modelreg/bundled.py:20
smollm2_safetensors  # modelreg/bundled.py:64
lay_out_hf_cache  # modelreg/bundled.py:102
gemma3_slim_bundle  # modelreg/bundled.py:142
_.forward  # modelreg/bundled.py:172
# cli/records.py: Typer reads a command's signature from it
_.__signature__  # modelreg/cli/records.py:179
# a Typer command registered by invoke_without_command
targets_list  # modelreg/cli/team.py:164
# jsonio.py: the bounded reader's public form (tests/test_jsonio.py)
loads_bounded  # modelreg/jsonio.py:76
# limits.py: the column sizes tests/test_limits.py checks against the tables
HOST_MAX  # modelreg/limits.py:25
# dataclass fields written for what they record, read by evidence/JSON
element_type  # modelreg/manifests/gguf.py:162
has_pickle  # modelreg/manifests/neuron.py:119
_.pt_archives  # modelreg/manifests/neuron.py:213
version_field  # modelreg/manifests/neuron_dtypes.py:85
base_sources  # modelreg/manifests/neuron_dtypes.py:96
expected_bytes  # modelreg/manifests/neuron_fit.py:294
interleaved_rows  # modelreg/manifests/tensor_types.py:41
# s3/oci has_copy: being removed with their hostile tests (issue 44 branch)
has_copy  # modelreg/oci.py:424
# progress.py: an enum member chosen by --progress none
NONE  # modelreg/progress.py:35
# SQLAlchemy event listeners and settings (registered by decorator / set for the driver)
_pragmas  # modelreg/registry/db.py:100
_.isolation_level  # modelreg/registry/db.py:103
_begin  # modelreg/registry/db.py:110
# registry/db.py: the schema head the store tests compare with
head_revision  # modelreg/registry/db.py:139
# Registry parts held for the Delegate descriptors (api/delegate.py reads them by name)
_._core  # modelreg/registry/reads.py:86
# SQLModel columns written for the audit trail
_.updated_at  # modelreg/registry/settings.py:40
_.updated_by  # modelreg/registry/settings.py:40
# transfer.py: the export as text (tests, the corpus builder)
export_text  # modelreg/registry/transfer.py:198
# SQLModel columns written for the audit trail
_.updated_at  # modelreg/registry/verdicts.py:486
_.attached_at  # modelreg/registry/writes.py:292
# prometheus_client calls collect() on a registered collector
_.collect  # modelreg/runmetrics.py:42
# urllib3 reads a pool's ConnectionCls
ConnectionCls  # modelreg/s3.py:158
# urllib3 reads a pool's ConnectionCls
ConnectionCls  # modelreg/s3.py:161
# s3/oci has_copy: being removed with their hostile tests (issue 44 branch)
has_copy  # modelreg/s3.py:237
# fields of a finding kept for its JSON
global_name  # modelreg/safety/pickles.py:169
tags  # modelreg/safety/templates.py:211
# named as a string for uvicorn's --workers factory
app_from_environment  # modelreg/server/app.py:127
# a dashboard value the template reads
registered  # modelreg/server/dashboard.py:394
# anyio's thread limiter: setting it sizes the pool
_.total_tokens  # modelreg/server/guard.py:67
# prometheus_client calls collect() on a registered collector
_.collect  # modelreg/server/metrics.py:57
# named as a string for uvicorn's http protocol; h11 calls send_400_response
NoDelayH11Protocol  # modelreg/server/protocol.py:25
_.send_400_response  # modelreg/server/protocol.py:92
# Target field: set from the definition, part of its fingerprint
neuron_devices  # modelreg/targets.py:164
# Target field: read by the license policy
license_policy  # modelreg/targets.py:353
# targets.py: one target by name (tests, scripts)
get_target  # modelreg/targets.py:822
# textsafe.py: the HTML form of the cleaning (tests; templates escape too)
for_html  # modelreg/textsafe.py:113
# llama_cpp context params set by attribute
_.n_ubatch  # modelreg/validators/llama_batched.py:187
_.n_seq_max  # modelreg/validators/llama_batched.py:188
_.kv_unified  # modelreg/validators/llama_batched.py:189
# llama_cpp context params set by attribute
_.n_ubatch  # modelreg/validators/llama_traffic.py:53
_.n_seq_max  # modelreg/validators/llama_traffic.py:54
_.kv_unified  # modelreg/validators/llama_traffic.py:55
# a file identity's fields, compared as a whole
mtime_ns  # modelreg/validators/staging.py:44
ctime_ns  # modelreg/validators/staging.py:45
# transformers calls a streamer's put()
_.put  # modelreg/validators/transformers_child.py:51
# transformers calls a streamer's put()
_.put  # modelreg/validators/transformers_child.py:127
# webhook_sender.py: lanes still sending (tests of the lanes)
busy_lanes  # modelreg/webhook_sender.py:139
# webhooks.py: the receiver's check, documented for receivers
verify_signature  # modelreg/webhooks.py:131

# pydantic and SQLModel fields (schemas/, registry/tables.py) and the dashboard's view
# values (server/views.py): read by serialization and templates, not by name in Python.
impl  # modelreg/registry/tables.py:24
cache_ok  # modelreg/registry/tables.py:25
_.process_bind_param  # modelreg/registry/tables.py:27
_.process_result_value  # modelreg/registry/tables.py:34
manifest_sha256  # modelreg/registry/tables.py:57
attached_at  # modelreg/registry/tables.py:229
updated_at  # modelreg/registry/tables.py:405
updated_by  # modelreg/registry/tables.py:406
higher_precision_tensors  # modelreg/schemas/manifest.py:359
feed_forward_length  # modelreg/schemas/manifest.py:383
split_count  # modelreg/schemas/manifest.py:444
quantization_version  # modelreg/schemas/manifest.py:446
sdk_version  # modelreg/schemas/manifest.py:562
compiled_on  # modelreg/schemas/manifest.py:564
pt_archives  # modelreg/schemas/manifest.py:568
derived_from  # modelreg/schemas/manifest.py:574
_.label_check  # modelreg/schemas/manifest.py:679
failed_run  # modelreg/schemas/output.py:339
failed_runs  # modelreg/schemas/output.py:348
verified_on_host  # modelreg/schemas/output.py:372
already_rolled_back  # modelreg/schemas/output.py:455
revision_before  # modelreg/schemas/output.py:727
verdicts_drifted  # modelreg/schemas/output.py:744
fetchable  # modelreg/schemas/output.py:776
manifest_digest  # modelreg/schemas/output.py:831
already_there  # modelreg/schemas/output.py:1062
scanned  # modelreg/schemas/output.py:1076
batching  # modelreg/schemas/suite.py:430
decode_tokens_per_s_min  # modelreg/schemas/suite.py:435
max_in_flight  # modelreg/schemas/suite.py:437
context_used_tokens  # modelreg/schemas/suite.py:453
context_tokens  # modelreg/schemas/suite.py:454
reference_dtype  # modelreg/schemas/suite.py:537
previous_offset  # modelreg/server/views.py:39
next_offset  # modelreg/server/views.py:40
value_text  # modelreg/server/views.py:72
css  # modelreg/server/views.py:75
height  # modelreg/server/views.py:82
reference_x  # modelreg/server/views.py:83
reference_text  # modelreg/server/views.py:84
label_width  # modelreg/server/views.py:85
bytes_text  # modelreg/server/views.py:154
css  # modelreg/server/views.py:157
budget_text  # modelreg/server/views.py:165
bar_width  # modelreg/server/views.py:168
css  # modelreg/server/views.py:223
polyline  # modelreg/server/views.py:231
top_text  # modelreg/server/views.py:232
bottom_text  # modelreg/server/views.py:233
first_text  # modelreg/server/views.py:234
last_text  # modelreg/server/views.py:235
height  # modelreg/server/views.py:237
