package org.compactbert.qa.app;

import android.app.Activity;
import android.content.res.AssetFileDescriptor;
import android.graphics.Color;
import android.os.Bundle;
import android.text.Editable;
import android.text.Spannable;
import android.text.style.BackgroundColorSpan;
import android.view.View;
import android.widget.AdapterView;
import android.widget.ArrayAdapter;
import android.widget.Button;
import android.widget.EditText;
import android.widget.Spinner;
import android.widget.TextView;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.compactbert.qa.Answer;
import org.compactbert.qa.ModelVocabulary;
import org.compactbert.qa.QuestionAnswerer;
import org.compactbert.qa.TokenizerSettings;
import org.compactbert.qa.Vocabulary;
import org.compactbert.qa.WordPieceTokenizer;

/**
 * Pick a sample passage (or paste your own), ask a question, see the answer highlighted in the
 * passage and how long the model took.
 *
 * <p>The model is {@code qa_model.tflite}: first from the app's external files directory (so a new
 * model needs only {@code adb push}), else from the APK's assets. Its vocabulary is the one its
 * metadata carries; a {@code vocab.txt} found the same way must be that one (it is refused
 * otherwise: {@link ModelVocabulary#choose}). All model work runs on one background thread: the
 * Interpreter is not thread-safe.
 */
public final class MainActivity extends Activity {
  static final String MODEL_FILE = "qa_model.tflite";
  static final String VOCAB_FILE = "vocab.txt";
  private static final Integer[] THREAD_CHOICES = {1, 2, 4, 8};
  private static final int DEFAULT_THREADS = 4;

  private final ExecutorService worker = Executors.newSingleThreadExecutor();
  private WordPieceTokenizer tokenizer;  // worker thread only
  private LiteRtModelRunner runner;  // worker thread only
  private QuestionAnswerer answerer;  // worker thread only
  private int requestedThreads;  // UI thread

  private List<SamplePassages.Passage> samples = new ArrayList<>();
  private EditText passageView;
  private EditText questionView;
  private Spinner sampleQuestions;
  private TextView answerView;
  private TextView statsView;
  private Button askButton;
  private BackgroundColorSpan highlight;

  @Override
  protected void onCreate(Bundle savedInstanceState) {
    super.onCreate(savedInstanceState);
    setContentView(R.layout.activity_main);
    passageView = findViewById(R.id.passage);
    questionView = findViewById(R.id.question);
    sampleQuestions = findViewById(R.id.sample_questions);
    answerView = findViewById(R.id.answer);
    statsView = findViewById(R.id.stats);
    askButton = findViewById(R.id.ask);

    try (InputStream in = getAssets().open(SamplePassages.ASSET)) {
      samples = SamplePassages.read(in);
    } catch (IOException e) {
      answerView.setText(getString(R.string.error, e.getMessage()));
    }
    List<Object> choices = new ArrayList<>(samples);
    choices.add(getString(R.string.paste_your_own));
    Spinner passages = findViewById(R.id.passages);
    passages.setAdapter(spinnerAdapter(choices));
    passages.setOnItemSelectedListener(new SimpleSelection(this::selectPassage));
    sampleQuestions.setOnItemSelectedListener(new SimpleSelection(position -> {
      Object question = sampleQuestions.getItemAtPosition(position);
      if (question != null) {
        questionView.setText(question.toString());
      }
    }));

    Spinner threads = findViewById(R.id.threads);
    threads.setAdapter(spinnerAdapter(THREAD_CHOICES));
    int index = java.util.Arrays.asList(THREAD_CHOICES).indexOf(DEFAULT_THREADS);
    threads.setSelection(index);
    // Changing the thread count rebuilds the interpreter (Options are fixed at creation).
    threads.setOnItemSelectedListener(new SimpleSelection(position -> {
      if (THREAD_CHOICES[position] != requestedThreads) {
        loadModel(THREAD_CHOICES[position]);
      }
    }));

    askButton.setOnClickListener(v -> ask());
    loadModel(DEFAULT_THREADS);
  }

  private <T> ArrayAdapter<T> spinnerAdapter(List<T> items) {
    ArrayAdapter<T> adapter =
        new ArrayAdapter<>(this, android.R.layout.simple_spinner_item, items);
    adapter.setDropDownViewResource(android.R.layout.simple_spinner_dropdown_item);
    return adapter;
  }

  private <T> ArrayAdapter<T> spinnerAdapter(T[] items) {
    return spinnerAdapter(java.util.Arrays.asList(items));
  }

  private void selectPassage(int position) {
    clearHighlight();
    answerView.setText("");
    if (position < samples.size()) {
      SamplePassages.Passage p = samples.get(position);
      passageView.setText(p.text);
      sampleQuestions.setAdapter(spinnerAdapter(p.questions));
      sampleQuestions.setVisibility(View.VISIBLE);
    } else {
      passageView.setText("");
      passageView.setHint(R.string.paste_hint);
      questionView.setText("");
      sampleQuestions.setAdapter(spinnerAdapter(new ArrayList<String>()));
      sampleQuestions.setVisibility(View.GONE);
      passageView.requestFocus();
    }
  }

  /** (Re)creates tokenizer and interpreter on the worker thread. */
  private void loadModel(int numThreads) {
    requestedThreads = numThreads;
    askButton.setEnabled(false);
    statsView.setText(getString(R.string.loading, numThreads));
    worker.execute(() -> {
      String status;
      try {
        ByteBuffer model = mapModel();
        if (tokenizer == null) {
          // The model's vocabulary and tokenizer settings (its tokenizer_config.json, if any).
          tokenizer = new WordPieceTokenizer(
              ModelVocabulary.choose(givenVocabulary(), VOCAB_FILE, model, MODEL_FILE),
              TokenizerSettings.ofModel(model, MODEL_FILE));
        }
        if (runner != null) {
          runner.close();
          runner = null;
        }
        runner = new LiteRtModelRunner(model, numThreads);
        answerer = new QuestionAnswerer(tokenizer, runner);
        status = getString(R.string.ready, runner.sequenceLength(), numThreads);
      } catch (IOException | RuntimeException e) {
        answerer = null;
        status = getString(R.string.error, e.getMessage());
      }
      String shown = status;
      boolean ready = answerer != null;
      runOnUiThread(() -> {
        statsView.setText(shown);
        askButton.setEnabled(ready);
      });
    });
  }

  /** A vocab.txt pushed or in the assets, or null: the model's own is then used. */
  private Vocabulary givenVocabulary() throws IOException {
    File pushed = new File(getExternalFilesDir(null), VOCAB_FILE);
    if (pushed.isFile()) {
      try (InputStream in = new FileInputStream(pushed)) {
        return Vocabulary.load(in, pushed.getPath());
      }
    }
    InputStream asset;
    try {
      asset = getAssets().open(VOCAB_FILE);
    } catch (FileNotFoundException e) {
      return null;
    }
    try (InputStream in = asset) {
      return Vocabulary.load(in, VOCAB_FILE);
    }
  }

  /** Memory-maps the model: a pushed file, else the (uncompressed) asset. */
  private ByteBuffer mapModel() throws IOException {
    File pushed = new File(getExternalFilesDir(null), MODEL_FILE);
    if (pushed.isFile()) {
      try (FileInputStream in = new FileInputStream(pushed)) {
        return in.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, pushed.length());
      }
    }
    try (AssetFileDescriptor fd = getAssets().openFd(MODEL_FILE);
        FileInputStream in = new FileInputStream(fd.getFileDescriptor())) {
      MappedByteBuffer buffer = in.getChannel().map(
          FileChannel.MapMode.READ_ONLY, fd.getStartOffset(), fd.getDeclaredLength());
      return buffer;
    }
  }

  private void ask() {
    String passage = passageView.getText().toString();
    String question = questionView.getText().toString();
    if (passage.trim().isEmpty() || question.trim().isEmpty()) {
      answerView.setText(R.string.need_both);
      return;
    }
    askButton.setEnabled(false);
    clearHighlight();
    worker.execute(() -> {
      QuestionAnswerer.Result result = null;
      String error = null;
      int length = 0;
      try {
        result = answerer.answer(passage, question);
        length = runner.sequenceLength();
      } catch (RuntimeException e) {
        error = e.getMessage();
      }
      QuestionAnswerer.Result shown = result;
      String failure = error;
      int sequenceLength = length;
      runOnUiThread(() -> {
        askButton.setEnabled(true);
        if (shown == null) {
          answerView.setText(getString(R.string.error, failure));
        } else if (passage.equals(passageView.getText().toString())) {
          show(shown, sequenceLength);
        }
      });
    });
  }

  private void show(QuestionAnswerer.Result result, int sequenceLength) {
    Answer answer = result.answer();
    if (answer.isEmpty() || answer.text().isEmpty()) {
      answerView.setText(R.string.no_answer);
    } else {
      answerView.setText(answer.text());
      highlight = new BackgroundColorSpan(Color.YELLOW);
      passageView.getText().setSpan(highlight, answer.start(), answer.end(),
          Spannable.SPAN_EXCLUSIVE_EXCLUSIVE);
      passageView.setSelection(answer.start());  // scrolls the answer into view
    }
    int longest = 0;  // a dynamic-length model runs each window at its own length
    for (int n : result.lengths()) {
      longest = Math.max(longest, n);
    }
    statsView.setText(String.format(Locale.US, getString(R.string.stats),
        result.inferenceNanos() / 1e6, result.windows(), result.totalNanos() / 1e6,
        longest > 0 ? longest : sequenceLength));
  }

  private void clearHighlight() {
    if (highlight != null) {
      Editable text = passageView.getText();
      text.removeSpan(highlight);
      highlight = null;
    }
  }

  @Override
  protected void onDestroy() {
    worker.execute(() -> {
      if (runner != null) {
        runner.close();
      }
    });
    worker.shutdown();
    super.onDestroy();
  }

  /** An item listener that only cares about selections. */
  private static final class SimpleSelection implements AdapterView.OnItemSelectedListener {
    interface Action {
      void selected(int position);
    }

    private final Action action;

    SimpleSelection(Action action) {
      this.action = action;
    }

    @Override
    public void onItemSelected(AdapterView<?> parent, View view, int position, long id) {
      action.selected(position);
    }

    @Override
    public void onNothingSelected(AdapterView<?> parent) {}
  }
}
