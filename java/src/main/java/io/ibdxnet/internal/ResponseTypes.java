package io.ibdxnet.internal;

import io.ibdxnet.Request;
import io.ibdxnet.Response;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.lang.reflect.TypeVariable;
import java.util.HashMap;
import java.util.Map;

/**
 * The response class {@code R} a request class declares ({@code extends
 * Request<R>}, possibly through generic superclasses), found once per class:
 * a response of another class must not reach the caller as {@code R}.
 * {@code Response} itself when the declaration leaves it open (a raw
 * {@code Request}, or {@code R} still a type variable): then nothing is checked.
 */
public final class ResponseTypes {
    private static final ClassValue<Class<?>> EXPECTED = new ClassValue<Class<?>>() {
        @Override
        protected Class<?> computeValue(Class<?> c) {
            return resolve(c);
        }
    };

    private ResponseTypes() {}

    /** The class responses to {@code request} must have. */
    public static Class<?> expected(Request<?> request) {
        return EXPECTED.get(request.getClass());
    }

    private static Class<?> resolve(Class<?> c) {
        // Walk up to Request, remembering what each type variable was bound to on the way.
        Map<TypeVariable<?>, Type> bound = new HashMap<>();
        for (Class<?> k = c; k != null && k != Request.class; k = k.getSuperclass()) {
            Type sup = k.getGenericSuperclass();
            if (!(sup instanceof ParameterizedType)) {
                continue; // a raw superclass: its variables stay unbound
            }
            ParameterizedType p = (ParameterizedType) sup;
            TypeVariable<?>[] vars = ((Class<?>) p.getRawType()).getTypeParameters();
            Type[] args = p.getActualTypeArguments();
            for (int i = 0; i < vars.length; i++) {
                Type a = args[i];
                while (a instanceof TypeVariable && bound.containsKey(a)) {
                    a = bound.get(a);
                }
                bound.put(vars[i], a);
            }
        }
        Type r = bound.get(Request.class.getTypeParameters()[0]);
        if (r instanceof ParameterizedType) {
            r = ((ParameterizedType) r).getRawType();
        }
        return r instanceof Class ? (Class<?>) r : Response.class;
    }
}
