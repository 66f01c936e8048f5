"""A speech encoder-decoder (a tiny Whisper saved with its processor): a WAV file heard as its
feature extractor hears it, every map exact against transformers' eager attention, its outputs and
its own transcript unchanged, and each output token's cross-attention over time in the record, the
file, the figure, the page and the studio."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attnkit
from attnkit.data.audio import decode_wav, encode_wav
from attnkit.search import SearchOptions
from tiny_hf import build_speech, tone


@pytest.fixture(scope="module")
def whisper(tmp_path_factory):
    return build_speech(tmp_path_factory.mktemp("speech") / "whisper")


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    """0.8 s of a tone and 0.2 s of silence, written at 8 kHz in stereo: resampled and mixed on reading."""
    from scipy.io import wavfile

    path = tmp_path_factory.mktemp("wav") / "tone.wav"
    mono = (tone(0.8, rate=8000, silence=0.2) * 32767).astype(np.int16)
    wavfile.write(path, 8000, np.stack([mono, mono], axis=1))
    return path


def _eager(path):
    import transformers as T

    return T.WhisperForConditionalGeneration.from_pretrained(path, attn_implementation="eager").eval()


def test_reading_a_wav_file_resamples_and_mixes_its_channels(sound):
    wave = decode_wav(sound.read_bytes(), 16000, name="tone")
    assert wave.dtype == np.float32 and len(wave) == 16000  # one second at the model's rate
    assert abs(float(np.abs(wave[:12000]).max()) - 0.5) < 0.02 and float(np.abs(wave[13500:]).max()) < 1e-3
    back = decode_wav(encode_wav(wave, 16000), 16000)
    np.testing.assert_allclose(back, wave, atol=1e-4)  # 16-bit PCM rounds to 1/32767
    for bad, why in ((b"hello", "not a readable WAV file"), (encode_wav(np.zeros(0), 16000), "no sound")):
        with pytest.raises(ValueError, match=why):
            decode_wav(bad, 16000, name="x.wav")


def test_each_token_s_attention_over_the_sound_is_exact(whisper, sound):
    model = attnkit.load(str(whisper))
    can = model.capabilities
    assert can.reads == "audio" and can.kinds == ("encoder", "decoder", "cross") and can.forced
    assert can.summary == "speech encoder-decoder" and model.verbs == ("transcribe",) and not can.circuits
    p = model.prepare([str(sound)], targets=["a dog runs ."])[0]
    assert p.tgt_in_tokens[:2] == ["<|startoftranscript|>", "<|notimestamps|>"]  # the tokenizer's prompt
    assert p.tgt_out_tokens[-1] == "<|endoftext|>" and p.tgt_out_tokens[:-1] == p.tgt_in_tokens[1:]
    assert len(p.src_tokens) == 100 and p.src_tokens[:2] == ["0.00s", "0.02s"]  # 2 s at 50 positions a second
    assert p.frame_seconds == pytest.approx(0.02) and p.spectrogram.shape == (16, 50)  # 1 s of sound heard
    record = model.capture(p)
    features = model.hf.audio_features(p.audio)
    eager = _eager(whisper)
    with torch.no_grad():
        out = eager(input_features=features, decoder_input_ids=torch.tensor([p.tgt_in_ids]), output_attentions=True)
        mine = model.hf.outputs(None, p.tgt_in_ids, audio=features)
    for kind, want in (
        ("encoder", out.encoder_attentions),
        ("decoder", out.decoder_attentions),
        ("cross", out.cross_attentions),
    ):
        assert record.get(kind).shape[0] == len(want)
        for layer, w in enumerate(want):
            np.testing.assert_allclose(record.get(kind)[layer], w[0].numpy(), atol=1e-5)
    scale = float(out.logits.abs().max())
    assert float((mine.logits - out.logits).abs().max()) <= 1e-5 * scale  # attnkit's function: the same outputs
    own = model.prepare([str(sound)], options=SearchOptions(beam=1))[0]
    with torch.no_grad():
        greedy = eager.generate(features, max_new_tokens=31, do_sample=False, return_dict_in_generate=True)
    assert own.tgt_in_ids + own.tgt_out_ids[-1:] == greedy.sequences[0].tolist()[: len(own.tgt_in_ids) + 1]
    assert model.transcribe(str(sound), beam=1) == own.output


def test_what_a_speech_model_refuses_in_one_line(whisper, sound, tmp_path):
    model = attnkit.load(str(whisper))
    long = tmp_path / "long.wav"
    long.write_bytes(encode_wav(tone(3.0), 16000))
    with pytest.raises(ValueError, match="hears 2 s at a time"):
        model.prepare([str(long)])
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.prepare([str(sound)], max_new_tokens=3)
    with pytest.raises(ValueError, match="gradient methods and ablation read text"):
        model.scorer(model.prepare([str(sound)], targets=["a dog"])[0])
    with pytest.raises(FileNotFoundError, match="sound file not found"):
        model.prepare([str(tmp_path / "none.wav")])


def test_the_file_the_figure_and_the_page_keep_the_sound(whisper, sound, tmp_path):
    from attnkit.inspection import load_records, save_records
    from attnkit.inspection.figures import record_figure

    model = attnkit.load(str(whisper))
    record = model.capture(model.prepare([str(sound)], targets=["a dog runs ."])[0])
    path = save_records(tmp_path / "r.npz", [record], model.info)
    back = load_records(path)[0][0]
    assert back.frame_seconds == pytest.approx(0.02) and back.spectrogram.shape == (16, 50)
    np.testing.assert_allclose(back.spectrogram, record.spectrogram, atol=1 / 255)
    np.testing.assert_allclose(back.get("cross"), record.get("cross"), atol=1e-6)
    fig = record_figure(back)  # every output token over the sound's time
    title = fig.get_suptitle()
    assert "1.00 s of sound, padded to 2 s;" in title and "a dog runs ." in title
    heat = fig.axes[1].images[0].get_array()
    want = record.select("cross", -1, "mean")[:, :50]
    np.testing.assert_allclose(np.asarray(heat), want, atol=1e-6)  # the rows drawn are the weights, unscaled
    padding = [t.get_text() for t in fig.axes[1].child_axes[0].get_yticklabels()]
    assert padding[0] == f"{100 * record.select('cross', -1, 'mean')[0, 50:].sum():.0f}%"
    run = [sys.executable, "-m", "attnkit"]
    page = tmp_path / "page.html"
    r = subprocess.run([*run, "view", str(whisper), str(sound), "-o", str(page)], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert '"frame_seconds":0.02' in page.read_text() and "data:image/png;base64" in page.read_text()
    bad = tmp_path / "bad.wav"
    bad.write_text("not a sound")
    r = subprocess.run([*run, "capture", str(whisper), str(bad), "-o", str(tmp_path / "x.npz")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not a readable WAV file" in r.stderr, r.stderr


def test_the_studio_hears_an_uploaded_sound(whisper, sound):
    import base64

    from starlette.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.schema import Models
    from attnkit.server.service import Studio

    with TestClient(
        create_app(Studio([str(whisper)])), raise_server_exceptions=False, base_url="http://127.0.0.1"
    ) as client:
        models = client.get("/api/models").json()
        Models.model_validate(models)
        can = models["models"][0]["capabilities"]
        assert can["reads"] == "audio" and can["summary"] == "speech encoder-decoder"
        audio = "data:audio/wav;base64," + base64.b64encode(sound.read_bytes()).decode()
        r = client.post("/api/translate", json={"text": "tone.wav", "audio": audio, "target": "a dog runs ."})
        assert r.status_code == 200, r.text
        example = r.json()["example"]
        assert example["frame_seconds"] == pytest.approx(0.02) and example["spectrogram"].startswith("data:image/png")
        assert example["tgt_out_tokens"][1:4] == ["a", "dog", "␣"] and len(example["src_tokens"]) == 100
        target = "a dog runs ."
        walk = client.post(
            "/api/explain",
            json={"text": "tone.wav", "audio": audio, "target": target, "kind": "cross", "layer": -1, "head": 1,
                  "query": 2},
        )  # fmt: skip
        assert walk.status_code == 200, walk.text
        model = attnkit.load(str(whisper))
        want = model.capture(model.prepare([str(sound)], targets=[target])[0]).select("cross", -1, 1)[2]
        assert walk.json()["key_tokens"][:2] == ["0.00s", "0.02s"] and walk.json()["max_error"] < 1e-5
        np.testing.assert_allclose(walk.json()["weights"], want, atol=1e-5)  # the sound heard again, the same row
        attributed = client.post("/api/attribute", json={"text": "tone.wav", "audio": audio, "method": "attention"})
        assert attributed.status_code == 200, attributed.text
        assert len(attributed.json()["tokens"]) == 100  # every encoder position, by its time
        for body, status, why in (
            ({"text": "tone.wav"}, 422, "send the sound as 'audio'"),
            ({"text": "tone.wav", "audio": "not base64!"}, 422, "'audio' is not valid base64"),
            ({"text": "tone.wav", "audio": base64.b64encode(b"hello").decode()}, 422, "not a readable WAV file"),
        ):
            bad = client.post("/api/translate", json=body)
            assert bad.status_code == status and why in bad.json()["error"], bad.text


def test_a_sound_for_a_text_model_is_one_line(tmp_path, sound):
    from starlette.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.service import Studio
    from tiny_hf import build

    gpt2 = build("gpt2", tmp_path / "gpt2")
    with TestClient(
        create_app(Studio([str(gpt2)])), raise_server_exceptions=False, base_url="http://127.0.0.1"
    ) as client:
        r = client.post("/api/translate", json={"text": "a dog", "audio": "AAAA"})
        assert r.status_code == 422 and "leave 'audio' out" in r.json()["error"], r.text


@pytest.mark.slow  # drives chromium
def test_the_page_draws_each_token_over_time(browser, whisper, sound, tmp_path):
    from attnkit.viewer import write_html

    model = attnkit.load(str(whisper))
    record = model.capture(model.prepare([str(sound)], targets=["a dog runs ."])[0])
    path = write_html(tmp_path / "page.html", [record], model.info)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#lines text", state="attached")  # a random model's weights: too even for lines
    page.click("#tabs [data-tab=audio]")
    page.wait_for_selector("#audio-heat")
    chips = page.locator("#audio-view .chip").all_inner_texts()
    assert chips == record.tgt_out_tokens
    page.click("#audio-view .chip >> text=dog")
    page.wait_for_selector("#audio-view .chip.on >> text=dog")
    box = page.eval_on_selector(
        "#audio-heat", "c => { const b = c.getBoundingClientRect(); return [b.left, b.top, b.width, b.height]; }"
    )
    label, heard = 170, 50
    cell = (box[2] - label - 10) / heard
    row = record.tgt_out_tokens.index("dog")
    grid_top = 110 + 4 + 70 + 4
    page.mouse.move(box[0] + label + 10.5 * cell, box[1] + grid_top + row * 18 + 9)  # position 10: 0.20-0.22 s
    readout = page.inner_text("#readout")
    want = record.select("cross", -1, "mean")[row, 10]
    assert f"dog → 0.20–0.22 s: weight {want:.4f}" in readout, readout
    legend = page.locator("#audio-view canvas").count()
    assert legend == 2 and errors == [], errors
