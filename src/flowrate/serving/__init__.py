"""Load tests of a running server speaking the OpenAI API: a streaming client, an open-loop
sender, the raw per-request trace, and its metrics under flowrate's, vLLM's and genai-perf's
definitions."""
