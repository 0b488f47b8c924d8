/**
 * A second change to node-llama-cpp's addon source: `decodeBatchAndSample(logitIndexes, samplers)` on
 * the native context decodes the batch and then samples each given batch logit index with its sampler,
 * all in one job of libuv's pool, and resolves once with every token (a Uint32Array).
 *
 * Through the binding as shipped a step is `decodeBatch()` and then `sampleToken()` per generating
 * sequence, each a job of its own whose completion wakes node's main thread; on a busy CPU each
 * wake-up waits for a time slice, and a bare llama-server decodes and samples in one thread with no
 * such hand-off. The samples here are the ones `sampleToken` takes (same sampler chain, no
 * probabilities or logits asked for), so the tokens are the same.
 *
 * A token that could not be sampled is NO_TOKEN (sampleToken's -1); a sampler that threw is
 * SAMPLE_FAILED, with its message at the same index of the array's `errors` property (set only then).
 * A failed decode rejects, and nothing is sampled.
 */

/** The method's name on the native context. */
export const FUSED_METHOD = 'decodeBatchAndSample';
/** No token was sampled (an empty candidate list): what sampleToken answers as -1. */
export const NO_TOKEN = 0xffffffff;
/** The sampler threw; the message is in `errors`. */
export const SAMPLE_FAILED = 0xfffffffe;

const DECLARE_AT = '        Napi::Value SampleToken(const Napi::CallbackInfo& info);';
const DECLARE = '        Napi::Value DecodeBatchAndSample(const Napi::CallbackInfo& info);';
const REGISTER_AT = '                InstanceMethod("sampleToken", &AddonContext::SampleToken),';
const REGISTER = `                InstanceMethod("${FUSED_METHOD}", &AddonContext::DecodeBatchAndSample),`;
const DEFINE_AT = 'Napi::Value AddonContext::DecodeBatch(const Napi::CallbackInfo& info) {';

const WORKER = String.raw`// Decode the batch, then sample the given logit indexes with their samplers, in one pool job: one
// completion (one wake-up of the main thread) per step instead of one per decode and per sample.
class AddonContextDecodeBatchAndSampleWorker : public Napi::AsyncWorker {
    public:
        AddonContextDecodeBatchAndSampleWorker(const Napi::CallbackInfo& info, AddonContext* ctx)
            : Napi::AsyncWorker(info.Env(), "AddonContextDecodeBatchAndSampleWorker"),
              ctx(ctx),
              deferred(Napi::Promise::Deferred::New(info.Env())) {
            ctx->Ref();
            const auto indexes = info[0].As<Napi::Uint32Array>();
            const auto samplerObjects = info[1].As<Napi::Array>();
            const size_t n = std::min(indexes.ElementLength(), static_cast<size_t>(samplerObjects.Length()));
            logitIndexes.reserve(n);
            samplers.reserve(n);
            for (size_t i = 0; i < n; i++) {
                logitIndexes.push_back(static_cast<int32_t>(indexes[i]));
                AddonSampler* sampler = Napi::ObjectWrap<AddonSampler>::Unwrap(samplerObjects.Get(static_cast<uint32_t>(i)).As<Napi::Object>());
                sampler->Ref();
                samplers.push_back(sampler);
            }
            tokens.assign(n, ${NO_TOKEN}u);
            errors.assign(n, std::string());
        }
        ~AddonContextDecodeBatchAndSampleWorker() {
            ctx->Unref();
            for (auto sampler : samplers) {
                sampler->Unref();
            }
        }

        Napi::Promise GetPromise() {
            return deferred.Promise();
        }

    protected:
        AddonContext* ctx;
        Napi::Promise::Deferred deferred;
        std::vector<int32_t> logitIndexes;
        std::vector<AddonSampler*> samplers;
        std::vector<uint32_t> tokens;
        std::vector<std::string> errors;
        bool anyFailed = false;

        void Execute() {
            try {
                ctx->sharedSamplerData.gotLogit = false;
                ctx->sharedSamplerData.hasLogits = false;

                int r = llama_decode(ctx->ctx, ctx->batch);

                if (r != 0) {
                    if (r == 1) {
                        SetError("could not find a KV slot for the batch (try reducing the size of the batch or increase the context)");
                    } else {
                        SetError("Eval has failed");
                    }

                    return;
                }

                llama_synchronize(ctx->ctx);
            } catch (const std::exception& e) {
                SetError(e.what());
                return;
            } catch(...) {
                SetError("Unknown error when calling \"llama_decode\"");
                return;
            }

            for (size_t i = 0; i < samplers.size(); i++) {
                try {
                    tokens[i] = SampleOne(samplers[i], logitIndexes[i]);
                } catch (const std::exception& e) {
                    tokens[i] = ${SAMPLE_FAILED}u;
                    errors[i] = e.what();
                    anyFailed = true;
                } catch(...) {
                    tokens[i] = ${SAMPLE_FAILED}u;
                    errors[i] = "Unknown error when calling \"SampleToken\"";
                    anyFailed = true;
                }
            }
        }

        // As AddonContextSampleTokenWorker::SampleToken with nothing but the token asked for.
        uint32_t SampleOne(AddonSampler* sampler, int32_t batchLogitIndex) {
            sampler->rebuildChainIfNeeded();

            std::unique_lock<std::mutex> samplingLock(ctx->sharedSamplerData.mutex);
            if (!ctx->sharedSamplerData.gotLogit) {
                ctx->sharedSamplerData.hasLogits = llama_get_logits(ctx->ctx) != nullptr;
                ctx->sharedSamplerData.gotLogit = true;
            }

            if (!ctx->sharedSamplerData.hasLogits) {
                throw std::runtime_error("This model does not support token generation");
            }

            llama_token_data_array cur_p;
            sampler->sampleAndReleaseLock(ctx->sharedSamplerData.mutex, samplingLock, ctx->ctx, batchLogitIndex, cur_p, false);

            if (cur_p.size == 0 || !(cur_p.selected >= 0 && cur_p.selected < (int32_t)cur_p.size)) {
                return ${NO_TOKEN}u;
            }

            auto new_token_id = cur_p.data[cur_p.selected].id;

            try {
                sampler->acceptToken(new_token_id);
            } catch (const std::exception& e) {
                throw std::runtime_error(std::string("Failed to accept token in sampler: ") + e.what());
            } catch(...) {
                throw std::runtime_error("Unknown error when calling \"acceptToken\"");
            }

            return static_cast<uint32_t>(new_token_id);
        }

        void OnOK() {
            auto result = Napi::Uint32Array::New(Env(), tokens.size());
            for (size_t i = 0; i < tokens.size(); i++) {
                result[i] = tokens[i];
            }

            if (anyFailed) {
                auto messages = Napi::Array::New(Env(), errors.size());
                for (size_t i = 0; i < errors.size(); i++) {
                    messages.Set(static_cast<uint32_t>(i), Napi::String::New(Env(), errors[i]));
                }
                result.Set("errors", messages);
            }

            deferred.Resolve(result);
        }
        void OnError(const Napi::Error& err) {
            deferred.Reject(err.Value());
        }
};

Napi::Value AddonContext::DecodeBatchAndSample(const Napi::CallbackInfo& info) {
    if (disposed) {
        Napi::Error::New(info.Env(), "Context is disposed").ThrowAsJavaScriptException();
        return info.Env().Undefined();
    }

    if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsArray()) {
        Napi::TypeError::New(info.Env(), "decodeBatchAndSample(logitIndexes: Uint32Array, samplers: AddonSampler[])").ThrowAsJavaScriptException();
        return info.Env().Undefined();
    }

    AddonContextDecodeBatchAndSampleWorker* worker = new AddonContextDecodeBatchAndSampleWorker(info, this);
    worker->Queue();
    return worker->GetPromise();
}

`;

function once(source: string, anchor: string, file: string): number {
  const at = source.indexOf(anchor);
  if (at < 0 || source.indexOf(anchor, at + 1) >= 0) throw new Error(`${file}: "${anchor.trim()}" was not found exactly once: this node-llama-cpp is not the one the patch was written for`);
  return at;
}

/** AddonContext.cpp with the fused method defined and registered (unchanged when it already is). */
export function patchFusedStep(source: string): string {
  if (source.includes('AddonContext::DecodeBatchAndSample')) return source;
  const def = once(source, DEFINE_AT, 'AddonContext.cpp');
  let out = source.slice(0, def) + WORKER + source.slice(def);
  const reg = once(out, REGISTER_AT, 'AddonContext.cpp') + REGISTER_AT.length;
  out = out.slice(0, reg) + '\n' + REGISTER + out.slice(reg);
  return out;
}

/** AddonContext.h with the fused method declared (unchanged when it already is). */
export function patchFusedStepHeader(source: string): string {
  if (source.includes('DecodeBatchAndSample(')) return source;
  const at = once(source, DECLARE_AT, 'AddonContext.h') + DECLARE_AT.length;
  return source.slice(0, at) + '\n' + DECLARE + source.slice(at);
}
